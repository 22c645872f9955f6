package main

import (
	"bytes"
	"os"
	"testing"
)

// TestGeneratedUpToDate fails when codecs/affine_amd64.s differs from what
// the generator writes (run `go generate ./codecs/`).
func TestGeneratedUpToDate(t *testing.T) {
	have, err := os.ReadFile("../../affine_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, generate()) {
		t.Fatal("codecs/affine_amd64.s is stale: run go generate ./codecs/")
	}
}
