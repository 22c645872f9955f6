package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/dgq/testmodel"
	"github.com/dgq-dev/dgq/hfcache"
)

// TestEveryExitCode drives every exit code of docs/cli.md's table from a
// real command line (issue 21), each asserting the code and that stderr is
// one line "dgq: …" saying what the class of the code says: nothing on
// success, the missing flag for a usage error, the invalid input, the
// `dgq download` fix for a stale cache, the I/O failure, the backend that
// cannot run, the interruption. A code the CLI has that no row drives
// fails the test.
func TestEveryExitCode(t *testing.T) {
	dir := t.TempDir()
	hub := filepath.Join(dir, "hub")
	snap, err := testmodel.WriteHubCache(hub)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(hfcache.EnvDGQHFHome, hub)
	repo := testmodel.HubInfo().Repo
	bf16 := demoPack(t, "bf16") // made from a plain folder: it records no Hugging Face source
	q4 := demoPack(t, "q4")
	ref := filepath.Join(dir, "ref")
	if err := testmodel.WriteReference(ref); err != nil {
		t.Fatal(err)
	}
	// A layered pack over the cache, then one byte changed in the data of a
	// shard it references (size and header unchanged: the pin holds).
	layered := filepath.Join(dir, "layered")
	if r := dgqRun("quantize", "--profile", "q4", "--overlay", "-m", repo, "-o", layered); r.code != 0 {
		t.Fatalf("quantize --overlay: %s", r.stderr)
	}
	m, err := dgq.ReadManifest(layered)
	if err != nil {
		t.Fatal(err)
	}
	shard := ""
	for _, tn := range m.Tensors {
		if tn.Source != nil && tn.Source.Kind == dgq.SourceExternal && tn.Size > 0 {
			shard = tn.Source.File
			blob, err := filepath.EvalSymlinks(filepath.Join(snap, shard))
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(blob)
			if err != nil {
				t.Fatal(err)
			}
			b[tn.Source.Offset] ^= 0x40
			if err := os.WriteFile(blob, b, 0o644); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	terminated, terminate := context.WithCancelCause(context.Background())
	terminate(signalCause{sig: syscall.SIGTERM})

	rows := []struct {
		name    string
		ctx     context.Context
		args    []string
		code    int
		mention []string // in the one stderr line (none: stderr empty)
		// json: the command has --json, and fails with an error object whose
		// kind names the code.
		json bool
	}{
		{"success", nil, []string{"inspect", bf16}, exitOK, nil, false},
		{"failure: a repack of the wrong kind of pack", nil,
			[]string{"repack", "--monolithic", "-m", bf16, "-o", filepath.Join(dir, "mono")}, exitFailure, []string{"already self-contained"}, false},
		{"usage: --hf-repo without --hf-revision", nil,
			[]string{"repack", "--overlay", "-m", bf16, "-o", filepath.Join(dir, "o"), "--hf-repo", "a/b"}, exitUsage, []string{"pass --hf-revision"}, false},
		{"usage: parity asked for a verdict it cannot give", nil,
			[]string{"parity", q4, "--reference", filepath.Join(ref, "reference.safetensors")}, exitUsage, []string{"no parity verdict", "dgq verify"}, false},
		{"invalid input: tokenize of a path that does not exist", nil,
			[]string{"tokenize", filepath.Join(dir, "nonexistent"), "x"}, exitInvalid, []string{"no tokenizer file", "nonexistent"}, true},
		{"invalid input: a pack that does not exist", nil,
			[]string{"inspect", filepath.Join(dir, "nonexistent")}, exitInvalid, []string{"nonexistent"}, true},
		{"stale cache: a changed byte in a pinned shard", nil,
			[]string{"run", layered, "--prompt", "hi"}, exitStale, []string{shard, "--include " + shard}, false},
		{"stale cache: audit of it", nil, []string{"audit", layered}, exitStale, []string{"audit", "1 problem"}, false},
		{"I/O: an output that cannot be created", nil,
			[]string{"demo", "-o", filepath.Join(file, "sub")}, exitIO, []string{"not a directory"}, false},
		{"no backend: cuda without a GPU", nil,
			[]string{"parity", bf16, "--reference", ref, "--backend", "cuda"}, exitBackend, []string{"cuda unavailable"}, true},
		{"interrupted: a canceled context", canceled, []string{"demo", "-o", filepath.Join(dir, "d130")}, exitCanceled, []string{"interrupted"}, false},
		{"interrupted by SIGTERM", terminated, []string{"demo", "-o", filepath.Join(dir, "d143")}, exitTerminated, []string{"SIGTERM"}, false},
	}
	driven, gpu := map[int]bool{}, false
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			ctx := r.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			var out, errb strings.Builder
			code := run(ctx, r.args, &out, &errb)
			res := result{code, out.String(), errb.String()}
			t.Logf("dgq %s: exit %d: %s", r.args[0], code, res.stderr)
			if r.code == exitBackend && code == exitOK {
				gpu = true
				t.Skip("this machine has a usable CUDA GPU")
			}
			driven[r.code] = true
			if r.code == exitOK {
				if code != exitOK || res.stderr != "" {
					t.Fatalf("dgq %s: exit %d, stderr %q", strings.Join(r.args, " "), code, res.stderr)
				}
				return
			}
			for _, m := range append([]string{""}, r.mention...) {
				assertOneLineError(t, res, r.code, m)
			}
			if r.args[0] == "audit" && (!strings.Contains(res.stdout, "stale") || !strings.Contains(res.stdout, "--include "+shard)) {
				t.Errorf("audit of a changed shard: %s", res.stdout)
			}
			// The same failure as a JSON error object names the code's kind.
			if r.json {
				var je jsonError
				res := dgqRunCtx(ctx, append(slices.Clone(r.args), "--json")...)
				if err := json.Unmarshal([]byte(res.stdout), &je); err != nil || je.Error.Code != r.code || je.Error.Kind != exitKinds[r.code] {
					t.Errorf("--json: exit %d, %v: %s", res.code, err, res.stdout)
				}
			}
		})
	}
	// Every code the CLI knows is driven above.
	codes := []int{exitOK}
	for c := range exitKinds {
		codes = append(codes, c)
	}
	for _, c := range classCodes {
		codes = append(codes, c)
	}
	for _, c := range codes {
		if !driven[c] && !(c == exitBackend && gpu) {
			t.Errorf("exit code %d is driven by no command line here", c)
		}
	}
}

// dgqRunCtx is dgqRun with a context.
func dgqRunCtx(ctx context.Context, args ...string) result {
	var out, errb strings.Builder
	code := run(ctx, args, &out, &errb)
	return result{code, out.String(), errb.String()}
}
