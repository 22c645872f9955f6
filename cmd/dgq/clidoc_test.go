package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dgq-dev/dgq/dgq/testmodel"
)

// cliDoc is docs/cli.md cut into what the tests below check: the rows of the
// Commands table and the sections, by heading.
type cliDoc struct {
	text     string
	rows     map[string]string // command name → its row of the Commands table
	sections []docSection
}

type docSection struct {
	level int
	title string
	body  string // the heading line and everything up to the next heading of the same or a higher level
}

func readCLIDoc(t *testing.T) *cliDoc {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	d := &cliDoc{text: string(raw), rows: map[string]string{}}
	lines := strings.Split(d.text, "\n")
	row := regexp.MustCompile("^\\| `dgq ([a-z-]+)[ `]")
	for _, l := range lines {
		if m := row.FindStringSubmatch(l); m != nil {
			d.rows[m[1]] += l + "\n"
		}
	}
	for i, l := range lines {
		level := len(l) - len(strings.TrimLeft(l, "#"))
		if level == 0 || level > 4 || !strings.HasPrefix(l[level:], " ") {
			continue
		}
		end := len(lines)
		for j := i + 1; j < len(lines); j++ {
			lv := len(lines[j]) - len(strings.TrimLeft(lines[j], "#"))
			if lv > 0 && lv <= level && strings.HasPrefix(lines[j][lv:], " ") {
				end = j
				break
			}
		}
		d.sections = append(d.sections, docSection{level: level, title: strings.TrimSpace(l[level:]), body: strings.Join(lines[i:end], "\n")})
	}
	return d
}

// of is everything the document says about one command: its row and every
// section whose title names it ("dgq NAME" anywhere in the title, or the
// bare name as the whole title).
func (d *cliDoc) of(name string) string {
	var b strings.Builder
	b.WriteString(d.rows[name])
	word := regexp.MustCompile(`\bdgq ` + regexp.QuoteMeta(name) + `\b`)
	for _, s := range d.sections {
		if word.MatchString(s.title) || s.title == name {
			b.WriteString(s.body)
			b.WriteString("\n")
		}
	}
	return b.String()
}

// documentedCommands are the subcommands a user can run (cobra's own help
// and completion aside).
func documentedCommands() []*cobra.Command {
	var out []*cobra.Command
	for _, c := range newRoot(&env{}).Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		out = append(out, c)
	}
	return out
}

// TestCLIDocCommandsAndFlags: docs/cli.md has a row in its Commands table
// for every command of the cobra tree, and names every flag of each (long
// name and shorthand) in that row or in the command's sections; and it has
// no row for a command that does not exist.
func TestCLIDocCommandsAndFlags(t *testing.T) {
	d := readCLIDoc(t)
	names := map[string]bool{}
	for _, c := range documentedCommands() {
		names[c.Name()] = true
		t.Run(c.Name(), func(t *testing.T) {
			if d.rows[c.Name()] == "" {
				t.Fatalf("docs/cli.md has no row `dgq %s …` in its Commands table", c.Name())
			}
			doc := d.of(c.Name())
			c.Flags().VisitAll(func(f *pflag.Flag) {
				if f.Name == "help" || f.Hidden {
					return
				}
				if !regexp.MustCompile(`--` + regexp.QuoteMeta(f.Name) + `\b`).MatchString(doc) {
					t.Errorf("flag --%s of dgq %s is not documented in its row or sections", f.Name, c.Name())
				}
				if f.Shorthand != "" && !regexp.MustCompile(`(^|[\s\[(`+"`"+`|])-`+regexp.QuoteMeta(f.Shorthand)+`\b`).MatchString(doc) {
					t.Errorf("shorthand -%s of dgq %s is not documented", f.Shorthand, c.Name())
				}
			})
		})
	}
	for n := range d.rows {
		if !names[n] {
			t.Errorf("docs/cli.md documents dgq %s, which is not a command", n)
		}
	}
}

// TestCLIDocExitCodes: every exit code the CLI uses has a row in the Exit
// codes table, and every JSON error kind is named.
func TestCLIDocExitCodes(t *testing.T) {
	d := readCLIDoc(t)
	var table string
	for _, s := range d.sections {
		if s.title == "Exit codes" {
			table = s.body
		}
	}
	if table == "" {
		t.Fatal("docs/cli.md has no Exit codes section")
	}
	codes := []int{exitOK}
	for c := range exitKinds {
		codes = append(codes, c)
	}
	for _, c := range classCodes {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	for _, c := range slices.Compact(codes) {
		if !strings.Contains(table, fmt.Sprintf("\n| %d |", c)) {
			t.Errorf("exit code %d has no row in the Exit codes table", c)
		}
	}
	for _, k := range exitKinds {
		if !strings.Contains(d.text, "`"+k+"`") {
			t.Errorf("JSON error kind %q is not documented", k)
		}
	}
}

// jsonKeys collects every object key of a JSON document.
func jsonKeys(t *testing.T, doc string) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("not one JSON document: %v: %.200s", err, doc)
	}
	seen := map[string]bool{}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for k, e := range x {
				seen[k] = true
				walk(e)
			}
		}
	}
	walk(v)
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// assertKeysDocumented fails for every key of a command's real --json output
// that its documentation does not name (as "key" or `key`).
func assertKeysDocumented(t *testing.T, d *cliDoc, command, output string) {
	t.Helper()
	doc := d.of(command)
	for _, k := range jsonKeys(t, output) {
		if !strings.Contains(doc, `"`+k+`"`) && !strings.Contains(doc, "`"+k+"`") {
			t.Errorf("dgq %s --json: key %q is not documented in its row or sections", command, k)
		}
	}
}

// TestCLIDocJSONKeys runs every command that has --json on the embedded tiny
// checkpoint and checks that each key of its real output is documented.
func TestCLIDocJSONKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every command")
	}
	d := readCLIDoc(t)
	src := tiny(t)
	pack := filepath.Join(t.TempDir(), "q4")
	bf16 := filepath.Join(t.TempDir(), "bf16")
	ref := t.TempDir()
	if err := testmodel.WriteReference(ref); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(t.TempDir(), "err.json")
	verifyOut := filepath.Join(t.TempDir(), "verify.json")
	// A hub cache holding the checkpoint, for a layered pack and both repacks.
	hub := filepath.Join(t.TempDir(), "hub")
	if _, err := testmodel.WriteHubCache(hub); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DGQ_HF_HOME", hub)
	repo := testmodel.HubInfo().Repo
	work := t.TempDir()
	calText := filepath.Join(work, "cal.txt")
	if err := os.WriteFile(calText, []byte(strings.Repeat("The sea was calm that morning, and the boats went out early. ", 20)), 0o644); err != nil {
		t.Fatal(err)
	}
	layered, direct := filepath.Join(work, "layered"), filepath.Join(work, "direct")
	steps := []struct {
		command string
		args    []string
		save    string
	}{
		{"quantize", []string{"quantize", "--profile", "q4", "-m", src, "-o", pack, "--report", report, "--json"}, ""},
		{"quantize", []string{"quantize", "--profile", "q4", "-m", src, "--dry-run", "--json"}, ""},
		{"quantize", []string{"quantize", "--profile", "bf16", "-m", src, "-o", bf16, "--json"}, ""},
		{"parity", []string{"parity", bf16, "--reference", filepath.Join(ref, "reference.safetensors"), "--json"}, ""},
		{"smoke", []string{"smoke", pack, "--json"}, ""},
		{"inspect", []string{"inspect", pack, "--json"}, ""},
		{"audit", []string{"audit", pack, "--json"}, ""},
		{"tokenize", []string{"tokenize", pack, "hello world", "--json"}, ""},
		{"bench", []string{"bench", pack, "--prompt-len", "8", "--canvas", "8", "--reps", "1", "--json"}, ""},
		{"run", []string{"run", pack, "--prompt", "hello", "--max-new-tokens", "32", "--json"}, ""},
		{"verify", []string{"verify", pack, "--source", src, "--windows", "2", "--prompt-len", "8", "--generations", "1", "--max-steps", "4", "--sensitivity", "--json"}, verifyOut},
		{"calibrate", []string{"calibrate", bf16, "--text", calText, "-o", filepath.Join(work, "tiny.imatrix.safetensors"), "--windows", "2", "--prompt-len", "8", "--json"}, ""},
		{"selftest", []string{"selftest", "--quick", "--json"}, ""},
		{"doctor", []string{"doctor", "--json"}, ""},
		{"version", []string{"version", "--json"}, ""},
		{"card", []string{"card", pack, "--verify", verifyOut, "--base-model", testmodel.HubInfo().Repo, "--json"}, ""},
		{"quantize", []string{"quantize", "--profile", "q4", "--overlay", "-m", repo, "-o", layered, "--json"}, ""},
		{"quantize", []string{"quantize", "--profile", "q4", "-m", repo, "-o", direct, "--json"}, ""},
		{"repack", []string{"repack", "--monolithic", "-m", layered, "-o", filepath.Join(work, "mono"), "--json"}, ""},
		{"repack", []string{"repack", "--overlay", "-m", direct, "-o", filepath.Join(work, "back"), "--json"}, ""},
		{"demo", []string{"demo", "--json"}, ""},
		{"demo", []string{"demo", "--profile", "bf16", "-o", filepath.Join(work, "demo"), "--json"}, ""},
	}
	seen := map[string]bool{}
	for _, s := range steps {
		r := dgqRun(s.args...)
		if r.code != 0 {
			t.Fatalf("dgq %s: exit %d: %s", strings.Join(s.args, " "), r.code, r.stderr)
		}
		if s.save != "" {
			if err := os.WriteFile(s.save, []byte(r.stdout), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		assertKeysDocumented(t, d, s.command, r.stdout)
		seen[s.command] = true
	}
	raw, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	assertKeysDocumented(t, d, "quantize", string(raw))
	// synth writes gigabytes at the real shapes: its object's keys, with
	// every field set, stand for a run.
	var synth strings.Builder
	if err := writeJSON(&synth, synthResult{Dir: "d", Layers: 1, Tensors: 1, Shards: 1, Bytes: 1}); err != nil {
		t.Fatal(err)
	}
	assertKeysDocumented(t, d, "synth", synth.String())
	seen["synth"] = true
	// The error object any failing --json command prints.
	r := dgqRun("inspect", filepath.Join(t.TempDir(), "none"), "--json")
	if r.code == 0 {
		t.Fatal("inspect of nothing succeeded")
	}
	for _, k := range jsonKeys(t, r.stdout) {
		if !strings.Contains(d.text, `"`+k+`"`) {
			t.Errorf("error JSON key %q is not documented", k)
		}
	}
	// Every command with --json is run above (download, which needs a Hub,
	// by its own test).
	for _, c := range documentedCommands() {
		if c.Flags().Lookup("json") != nil && !seen[c.Name()] && c.Name() != "download" {
			t.Errorf("dgq %s has --json but this test does not check its keys", c.Name())
		}
	}
}
