//go:build !unix

package hub

import (
	"context"
)

// freeSpace cannot be told on this system: the free-space check is skipped.
func freeSpace(string) (int64, bool) { return 0, false }

// diskErr returns err: a full disk is not recognized on this system.
func diskErr(err error) error { return err }

// lockFile takes no lock on this system.
func lockFile(context.Context, string) (func(), error) { return func() {}, nil }
