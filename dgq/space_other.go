//go:build !unix

package dgq

// freeSpace is not measured off Unix.
func freeSpace(string) (int64, bool) { return 0, false }
