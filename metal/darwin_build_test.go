//go:build !darwin

package metal

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestDarwinBuild proves here what can be proven of the darwin engine off a
// Mac: the package vets and its test binary (metal_darwin_test.go, the
// tests a Mac runs) compiles and links for darwin/arm64 without cgo, as
// users build dgq. .ci/darwin does the same for the whole module.
func TestDarwinBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles the package: not in -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool: %v", err)
	}
	env := append(os.Environ(), "GOOS=darwin", "GOARCH=arm64", "CGO_ENABLED=0")
	for _, args := range [][]string{
		{"vet", "."},
		{"test", "-c", "-o", filepath.Join(t.TempDir(), "metal.test"), "."},
	} {
		cmd := exec.Command(goTool, args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("GOOS=darwin GOARCH=arm64 go %v: %v\n%s", args, err, out)
		}
	}
}
