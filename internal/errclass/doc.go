// Package errclass sorts errors into the few classes a caller acts on
// differently: a usage error (fix the command line), invalid input (fix or
// replace the file), a stale Hugging Face cache (download again), an I/O
// failure, a compute backend that cannot run here, an interruption, and
// everything else (unclassified). The dgq command maps each class to its exit
// code (docs/cli.md).
//
// A package makes its sentinels with New (or Wrap) instead of errors.New: the
// sentinel reads exactly as its text, callers still test it with errors.Is
// (by identity), and Of finds its class however deep it is wrapped, through
// fmt.Errorf's %w and errors.Join alike.
//
// errclass is a leaf: it imports only the standard library, so every package
// of the module can use it.
package errclass
