package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dgq-dev/dgq/runtime/selftest"
)

// env is what every command needs besides its flags.
type env struct {
	ctx            context.Context
	stdout, stderr io.Writer
	// interactive: stderr is a terminal, so progress bars are drawn.
	interactive bool
}

// run executes the command line and returns the process exit code. Tests
// call it in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{ctx: ctx, stdout: stdout, stderr: stderr, interactive: isTerminal(stderr)}
	root := newRoot(e)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	var ce *codedError
	if errors.As(err, &ce) && ce.silent {
		return ce.code
	}
	code := exitCode(err)
	if isCobraUsage(err) {
		code = exitUsage
		err = unknownCommand(root, err)
	}
	msg := "dgq: " + message(err.Error())
	jsonErr := wantsJSON(args)
	if code == exitCanceled { // interrupt.go: the signal's code, one line naming the command
		code, msg, jsonErr = interruption(ctx, cmd, err, jsonErr)
	}
	fmt.Fprintln(stderr, msg)
	if jsonErr {
		writeJSON(stdout, jsonError{Error: jsonErrorBody{Code: code, Kind: exitKinds[code], Message: msg}})
	}
	return code
}

// jsonError is what a command run with --json prints on stdout when it fails
// (the one-line message still goes to stderr).
type jsonError struct {
	Error jsonErrorBody `json:"error"`
}

type jsonErrorBody struct {
	Code    int    `json:"code"`
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// wantsJSON reports whether --json was given, looked up in the raw
// arguments so that even a command line cobra cannot parse gets a JSON error.
func wantsJSON(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--json" || a == "--json=true" {
			return true
		}
	}
	return false
}

// cobraUsagePrefixes are the messages cobra gives for command lines it
// cannot parse; it has no typed errors for them.
var cobraUsagePrefixes = []string{"unknown command", "required flag", "unknown flag", "unknown shorthand", "flag needs an argument", "invalid argument"}

func isCobraUsage(err error) bool {
	for _, p := range cobraUsagePrefixes {
		if strings.HasPrefix(err.Error(), p) {
			return true
		}
	}
	return false
}

// unknownCommandText is cobra's message for a command the root lacks.
var unknownCommandText = regexp.MustCompile(`^unknown command "([^"]*)" for "dgq"`)

// unknownCommand rewrites cobra's "unknown command "X" for "dgq"" (which
// spans lines when it has suggestions) as one line naming the closest
// commands; any other error is returned as is.
func unknownCommand(root *cobra.Command, err error) error {
	m := unknownCommandText.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	if s := root.SuggestionsFor(m[1]); len(s) > 0 {
		return fmt.Errorf("unknown command %q; did you mean %s?", m[1], strings.Join(s, " or "))
	}
	return fmt.Errorf("unknown command %q (dgq --help lists the commands)", m[1])
}

// packagePrefix matches a Go package's name where the library puts it in
// front of its messages ("layout: unknown profile", "…: hfcache: missing
// file"): at the start of the message or of a part of it (after ": ", "; "
// or "("). The backends' names (cuda, metal) are kept: they are what the
// user chose with --backend.
var packagePrefix = regexp.MustCompile(`(^|: |; |\()(?:dgq|codecs|layout|hfcache|hub|overlay|backend|cpu|model|generate|session|tokenizer|check|conformance|selftest|kernels|errclass|testmodel|enginepack|limits|msl|calibrate): `)

// message is an error's text as the user reads it after "dgq: ": one line,
// without the Go package names the library's messages start with (every
// package prefixes its own, so a wrapped error repeats them: "pack X:
// hfcache: not in the hub cache", "dgq: dgq: invalid manifest").
func message(s string) string {
	s = oneLine(s)
	for {
		t := packagePrefix.ReplaceAllString(s, "$1")
		if t == s {
			return s
		}
		s = t
	}
}

// commandMap is the root help: every command, by task.
const commandMap = `dgq turns a Hugging Face DiffusionGemma checkpoint into a quantized .dgq pack, checks the pack,
runs it and publishes it. Every bad input is refused with a one-line error naming the problem and the fix.

Get a model:      download   fetch a checkpoint or a pack from the Hugging Face Hub into the cache
Make a pack:      quantize   stream a checkpoint into a pack (profiles bf16, q4, q5, q6, nvfp4, nvfp4x)
                  calibrate  measure an importance matrix of a bf16 model on a text (for quantization)
                  repack     split a pack into a layered overlay on its base, or flatten a layered pack
                  demo       quantize, inspect and audit the embedded tiny checkpoint (nothing to download)
                  synth      write a real-shape synthetic checkpoint for benchmarks (development)
Check a pack:     inspect    the manifest, the per-class summary, every tensor (reads no weights)
                  audit      every rule and every digest; --deep decodes every tensor
                  verify     how far the pack's outputs are from its bf16 source's (KLD, top-1, per layer)
                  parity     replay transformers' reference scenarios and compare every tensor
                  smoke      a quick battery: finite logits, determinism, parity, a short verify
Run it:           run        generate a reply to a prompt
                  tokenize   the token ids of a text
                  bench      time a prefill and one generation step
Publish it:       card       write the pack's Hugging Face model card (README.md)
This machine:     doctor     the OS, CPU, backends, Hugging Face cache and token, free disk
                  selftest   prove a backend here: conformance, kernels, parity, lockstep
                  version    this build

The CPU backend is the reference: exact, and slow on the 26B model (minutes per denoising step on a few
cores). To chat with the 26B model run it on a GPU: --backend cuda (NVIDIA) or --backend metal (Apple silicon).

Exit codes: 0 success; 1 a failed check or bound; 2 usage; 3 invalid input; 4 stale Hugging Face cache;
5 I/O; 6 the backend cannot run here; 130 interrupted (143 by SIGTERM). docs/cli.md has every command's details.`

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:                        "dgq",
		Short:                      "Quantize DiffusionGemma checkpoints into .dgq packs, check them, run them and publish them",
		Long:                       commandMap,
		SilenceUsage:               true,
		SilenceErrors:              true,
		DisableSuggestions:         true, // unknownCommand suggests, on one line
		SuggestionsMinimumDistance: 2,
		Version:                    versionString(),
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErr(fmt.Errorf("%w (see dgq %s --help)", flagProblem(err), c.Name()))
	})
	root.AddCommand(newQuantizeCmd(e), newDownloadCmd(e), newInspectCmd(e), newAuditCmd(e), newRepackCmd(e), newDemoCmd(e), newSynthCmd(e),
		newParityCmd(e), newRunCmd(e), newTokenizeCmd(e), newSmokeCmd(e), newBenchCmd(e), newVerifyCmd(e), newCalibrateCmd(e), newSelftestCmd(e), newDoctorCmd(e), newVersionCmd(e), newCardCmd(e))
	for _, c := range root.Commands() {
		c.Args = wrapArgs(c.Args)
	}
	return root
}

// wrapArgs turns cobra's positional-argument errors into usage errors that
// say, in the command's own words, what is missing or too much.
func wrapArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	if check == nil {
		return nil
	}
	return func(c *cobra.Command, args []string) error {
		if err := check(c, args); err != nil {
			return usageErr(fmt.Errorf("%s (see dgq %s --help)", argsProblem(c, args), c.Name()))
		}
		return nil
	}
}

// flagProblem rewrites pflag's "invalid argument "abc" for "--windows" flag:
// strconv.ParseInt: parsing "abc": invalid syntax" as "--windows "abc" is
// not a whole number"; other flag errors are returned as they are.
func flagProblem(err error) error {
	var ive *pflag.InvalidValueError
	if !errors.As(err, &ive) {
		return err
	}
	name := "--" + ive.GetFlag().Name
	if errors.Is(err, strconv.ErrRange) {
		return fmt.Errorf("%s %q is out of range", name, ive.GetValue())
	}
	want := map[string]string{
		"int": "a whole number", "int64": "a whole number", "uint": "a whole number ≥ 0", "uint64": "a whole number ≥ 0",
		"float64": "a number", "float64Slice": "a list of numbers separated by commas", "bool": "true or false",
		"duration": "a duration such as 30s or 5m",
	}[ive.GetFlag().Value.Type()]
	if want == "" {
		if cause := errors.Unwrap(ive); cause != nil { // a value type of dgq's own (limits.Bytes) says why
			return fmt.Errorf("%s %q %v", name, ive.GetValue(), cause)
		}
		want = "a valid " + ive.GetFlag().Value.Type()
	}
	return fmt.Errorf("%s %q is not %s", name, ive.GetValue(), want)
}

// argNames are the positional arguments c's Use line names: the words after
// the command's name up to the first flag or option ("inspect PACK [--json]"
// → PACK).
func argNames(c *cobra.Command) []string {
	var names []string
	for _, w := range strings.Fields(c.Use)[1:] {
		if strings.HasPrefix(w, "-") || strings.HasPrefix(w, "[") || strings.HasPrefix(w, "(") {
			break
		}
		names = append(names, w)
	}
	return names
}

// argsProblem says what is wrong with args for c: the arguments it lacks,
// or the first one it does not take.
func argsProblem(c *cobra.Command, args []string) string {
	names := argNames(c)
	switch {
	case len(args) < len(names):
		return fmt.Sprintf("%s: missing %s", c.Name(), strings.Join(names[len(args):], " "))
	case len(names) == 0:
		return fmt.Sprintf("%s: unexpected argument %q; it takes none, options start with --", c.Name(), args[0])
	}
	return fmt.Sprintf("%s: unexpected argument %q; it takes %s", c.Name(), args[len(names)], strings.Join(names, " "))
}

// oneLine keeps an error message on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

// versionString is dgq --version: the release and the VCS revision built
// (versionLine; dgq version prints the whole build).
func versionString() string { return versionLine(selftest.ReadBuild()) }
