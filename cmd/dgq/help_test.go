package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestHelpEveryCommand: every command has a long help that says what it
// does and reads, and its exit codes; the root help maps every command.
func TestHelpEveryCommand(t *testing.T) {
	root := newRoot(&env{})
	for _, c := range documentedCommands() {
		if len(c.Long) < 200 || !strings.Contains(c.Long, "Exit codes:") {
			t.Errorf("dgq %s: the long help is missing or says no exit codes: %q", c.Name(), c.Long)
		}
		if !strings.Contains(root.Long, "  "+c.Name()+"  ") {
			t.Errorf("the root help does not map dgq %s", c.Name())
		}
		r := dgqRun(c.Name(), "--help")
		if r.code != 0 || !strings.Contains(r.stdout, "Exit codes:") {
			t.Errorf("dgq %s --help: exit %d: %.200q", c.Name(), r.code, r.stdout)
		}
	}
	for _, task := range []string{"Get a model:", "Make a pack:", "Check a pack:", "Run it:", "Publish it:", "This machine:"} {
		if !strings.Contains(root.Long, task) {
			t.Errorf("the root help lacks %q", task)
		}
	}
}

// renamed are the flags renamed to one vocabulary (docs/cli.md, "Flag
// vocabulary"): command, old name, new name, a value.
var renamed = []struct{ command, old, current, value string }{
	{"verify", "prefix", "prompt-len", "9"},
	{"verify", "gen-tokens", "max-new-tokens", "7"},
	{"verify", "gen-steps", "max-steps", "3"},
	{"bench", "profile", "time-ops", "true"},
}

func subcommand(root *cobra.Command, name string) *cobra.Command {
	for _, c := range root.Commands() {
		if c.Name() == name {
			return c
		}
	}
	return nil
}

// TestRenamedFlags: each old name is a hidden alias of the new one — not in
// --help, setting the same value — and using it prints one note on stderr.
func TestRenamedFlags(t *testing.T) {
	for _, r := range renamed {
		t.Run(r.command+" --"+r.old, func(t *testing.T) {
			var stderr bytes.Buffer
			c := subcommand(newRoot(&env{stderr: &stderr}), r.command)
			old, cur := c.Flags().Lookup(r.old), c.Flags().Lookup(r.current)
			if old == nil || cur == nil || !old.Hidden || cur.Hidden {
				t.Fatalf("--%s %v, --%s %v", r.old, old, r.current, cur)
			}
			if err := c.ParseFlags([]string{"--" + r.old + "=" + r.value}); err != nil {
				t.Fatal(err)
			}
			if got := cur.Value.String(); got != r.value {
				t.Errorf("--%s %s left --%s at %s", r.old, r.value, r.current, got)
			}
			want := "dgq: note: --" + r.old + " is deprecated and will be removed in the next release; use --" + r.current + "\n"
			if stderr.String() != want {
				t.Errorf("stderr %q, want %q", stderr.String(), want)
			}
			if h := dgqRun(r.command, "--help"); strings.Contains(h.stdout, "--"+r.old+" ") {
				t.Errorf("dgq %s --help lists --%s", r.command, r.old)
			}
		})
	}
	// End to end: the old name still runs the command.
	pack := demoPack(t, "q4")
	res := dgqRun("bench", pack, "--prompt-len", "4", "--canvas", "4", "--reps", "1", "--profile")
	if res.code != 0 || !strings.Contains(res.stderr, "--profile is deprecated") || !strings.Contains(res.stdout, "6 layers, 908 KiB of weights") {
		t.Errorf("bench --profile: exit %d, stderr %q, stdout %q", res.code, res.stderr, res.stdout)
	}
}

// TestNewFlags: smoke takes the backend flags and --skip-digests; run and
// parity take --skip-digests; repack, demo and synth take --json.
func TestNewFlags(t *testing.T) {
	root := newRoot(&env{})
	for command, flags := range map[string][]string{
		"smoke":  {"backend", "precision", "workers", "skip-digests"},
		"run":    {"skip-digests"},
		"parity": {"skip-digests"},
		"repack": {"json"},
		"demo":   {"json"},
		"synth":  {"json"},
	} {
		for _, f := range flags {
			if subcommand(root, command).Flags().Lookup(f) == nil {
				t.Errorf("dgq %s has no --%s", command, f)
			}
		}
	}
	pack := demoPack(t, "bf16")
	r := dgqRun("smoke", pack, "--skip-digests", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, "digests trusted (--skip-digests)") {
		t.Errorf("smoke --skip-digests: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	assertOneLineError(t, dgqRun("smoke", pack, "--backend", "tpu"), exitUsage, "tpu")
	assertOneLineError(t, dgqRun("smoke", pack, "--precision", "bf16"), exitUsage, "--precision")
}
