package main

import (
	"bytes"
	"os"
	"testing"
)

// TestGeneratedUpToDate fails when a generated codecs/*_amd64.s file differs
// from what the generator writes (run `go generate ./codecs/`).
func TestGeneratedUpToDate(t *testing.T) {
	for _, f := range files {
		have, err := os.ReadFile("../../" + f.name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(have, f.gen()) {
			t.Errorf("codecs/%s is stale: run go generate ./codecs/", f.name)
		}
	}
}
