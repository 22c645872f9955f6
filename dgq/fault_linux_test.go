//go:build linux

package dgq

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A real full disk: a 600 KiB tmpfs cannot hold the tiny pack's blob.
func TestDiskFullOnTmpfs(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=600k"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	defer syscall.Unmount(dir, 0)
	out := filepath.Join(dir, "out")
	_, err := Quantize(context.Background(), QuantizeOptions{Source: tinySnapshot(t), Out: out, Profile: "q4"})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("quantize onto a full tmpfs: %v", err)
	}
	assertNoOutput(t, out)
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Fatalf("left behind on the full disk: %v", entries)
	}
}
