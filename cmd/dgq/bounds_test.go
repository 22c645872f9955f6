package main

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dgq-dev/dgq/hfcache"
)

// flagBounds are the extreme values of one numeric flag: each of refuse
// must be refused before any work, in one line naming the flag, with exit
// code 2. zero, when not "", is what 0 documentedly means (the flag's
// usage must say "0 ="); 0 is then not refused.
type flagBounds struct {
	zero   string
	refuse []string
}

// Values every flag of a kind is fed.
var (
	// seedBounds: a seed may be any uint64 (0 is one like any other), but
	// must parse.
	seedBounds   = flagBounds{refuse: []string{"-1", "18446744073709551616", "x"}}
	workerBounds = flagBounds{zero: "all cores", refuse: []string{"-3", "-5", "100000", "9223372036854775808"}}
	// memoryBounds: --max-memory is a size; leaving it out is the
	// backend's memory.
	memoryBounds = flagBounds{refuse: []string{"0", "-1", "-5GB", "2PB", "1e30", "NaN", "12 parsecs"}}
)

// numericFlagBounds lists every numeric flag of every command (int, uint,
// float, their slices, byte sizes) with its extreme values.
// TestEveryNumericFlagIsBounded fails for a numeric flag missing here.
var numericFlagBounds = map[string]map[string]flagBounds{
	"quantize": {"workers": workerBounds},
	"download": {"connections": {refuse: []string{"0", "-1", "257", "100000"}}},
	"synth": {
		"layers":     {refuse: []string{"0", "-1", "31", "100000"}},
		"seed":       seedBounds,
		"shard-size": {zero: "5000000000", refuse: []string{"-5", "1", "32767", "1099511627777", "99999999999999999999"}},
	},
	"parity": {"workers": workerBounds, "max-memory": memoryBounds},
	"run": {
		"max-new-tokens": {zero: "generation_config.json", refuse: []string{"-5", "4096", "1048576", "100000000"}},
		"max-steps":      {zero: "generation_config.json", refuse: []string{"-1", "4097", "100000000"}},
		"seed":           seedBounds,
		"workers":        workerBounds,
		"max-memory":     memoryBounds,
	},
	"bench": {
		// The tiny checkpoint's config: max_position_embeddings 4096,
		// canvas_length 16.
		"prompt-len": {refuse: []string{"0", "-1", "4081", "100000", "1000000000"}},
		"canvas":     {zero: "the config's canvas_length", refuse: []string{"-1", "17", "4097", "100000"}},
		"reps":       {refuse: []string{"0", "-1", "1001", "100000000"}},
		"seed":       seedBounds,
		"workers":    workerBounds,
		"max-memory": memoryBounds,
	},
	"smoke":    {"seed": seedBounds, "workers": workerBounds, "max-memory": memoryBounds},
	"selftest": {"workers": workerBounds},
	"verify": {
		"windows":        {refuse: []string{"0", "-1", "4097", "100000000"}},
		"prompt-len":     {refuse: []string{"0", "-1", "4081", "1000000000"}},
		"canvas":         {zero: "the config's canvas_length", refuse: []string{"-1", "17", "100000"}},
		"noise-rates":    {refuse: []string{"0", "-0.5", "1.5", "NaN", "0.5,2", strings.TrimSuffix(strings.Repeat("0.5,", 65), ",")}},
		"generations":    {zero: "none", refuse: []string{"-1", "1025", "100000"}},
		"max-new-tokens": {zero: "one canvas", refuse: []string{"-1", "4096", "100000000"}},
		"max-steps":      {zero: "the generation config's", refuse: []string{"-1", "4097", "100000"}},
		"seed":           seedBounds,
		"workers":        workerBounds,
		"max-memory":     memoryBounds,
	},
	"calibrate": {
		"windows":    {refuse: []string{"0", "-1", "4097", "100000000"}},
		"prompt-len": {refuse: []string{"0", "-1", "4081", "1000000000"}},
		"seed":       seedBounds,
		"workers":    workerBounds,
		"max-memory": memoryBounds,
	},
}

// numericKinds are the pflag value types that hold numbers.
var numericKinds = []string{"int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64",
	"float32", "float64", "intSlice", "int32Slice", "int64Slice", "uintSlice", "float32Slice", "float64Slice", "count", "bytes"}

// TestEveryNumericFlagIsBounded walks the cobra tree: every numeric flag of
// every command has an entry in numericFlagBounds (a hidden deprecated
// alias through the flag it names), a documented zero says so in its
// usage, and the table names no flag that does not exist.
func TestEveryNumericFlagIsBounded(t *testing.T) {
	seen := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if !slices.Contains(numericKinds, f.Value.Type()) {
				return
			}
			name := f.Name
			if alias, ok := strings.CutPrefix(f.Usage, "deprecated: use --"); ok && f.Hidden {
				name = alias
			}
			b, ok := numericFlagBounds[c.Name()][name]
			if !ok {
				t.Errorf("dgq %s --%s (%s) has no entry in numericFlagBounds: bound it in the library and list its extreme values", c.Name(), f.Name, f.Value.Type())
				return
			}
			seen[c.Name()+" "+name] = true
			if b.zero != "" && !f.Hidden && !strings.Contains(f.Usage, "0 =") && !strings.Contains(f.Usage, "0 is") {
				t.Errorf("dgq %s --%s: 0 means %s, but its usage %q does not say what 0 is", c.Name(), f.Name, b.zero, f.Usage)
			}
			if len(b.refuse) == 0 {
				t.Errorf("dgq %s --%s: no value to refuse", c.Name(), f.Name)
			}
		})
	}
	walk(newRoot(&env{}))
	for cmd, flags := range numericFlagBounds {
		for name := range flags {
			if !seen[cmd+" "+name] {
				t.Errorf("numericFlagBounds lists dgq %s --%s, which is not a numeric flag", cmd, name)
			}
		}
	}
}

// boundsArgs are a valid command line of each command, up to the flag
// under test: everything it needs before it would start working.
func boundsArgs(t *testing.T) map[string][]string {
	t.Helper()
	q4, bf16 := demoPack(t, "q4"), demoPack(t, "bf16")
	ref := filepath.Join("..", "..", "dgq", "testmodel", "tiny", "reference", "reference.safetensors")
	out := filepath.Join(t.TempDir(), "out")
	text := filepath.Join(t.TempDir(), "cal.txt")
	if err := os.WriteFile(text, []byte(strings.Repeat("The sea was calm that morning. ", 40)), 0o644); err != nil {
		t.Fatal(err)
	}
	return map[string][]string{
		"quantize": {"quantize", "--profile", "q4", "-m", tiny(t), "-o", out},
		"download": {"download", "dgq-test/nothing"},
		"synth":    {"synth", "-o", out},
		"parity":   {"parity", bf16, "--reference", ref},
		"run":      {"run", q4, "--prompt", "hi"},
		"bench":    {"bench", q4},
		"smoke":    {"smoke", q4},
		"selftest": {"selftest", "--quick"},
		"verify":   {"verify", q4, "--source", bf16},

		"calibrate": {"calibrate", bf16, "--text", text, "-o", out + ".imatrix.safetensors"},
	}
}

// maxRefusalAlloc is what a refusal may allocate, in bytes: parsing the
// command line and reading the pack's manifest and config, nothing of its
// weights.
const maxRefusalAlloc = 4 << 20

// TestNumericFlagBounds feeds every numeric flag of every command its
// extreme values: each is refused in one line naming the flag, with exit
// code 2, before any work — the process allocates less than
// maxRefusalAlloc for it (measured in process: runtime.MemStats.TotalAlloc
// before and after). The bounds of positions and canvas come from the tiny
// checkpoint's config (4096 positions, a canvas of 16), not from the
// machine: --prompt-len 1000000000, which once ran out of memory, names the
// model's 4096.
func TestNumericFlagBounds(t *testing.T) {
	home := t.TempDir() // no hub cache: nothing to find, nothing to write there
	for _, k := range []string{hfcache.EnvDGQHFHome, hfcache.EnvHFHubCache, hfcache.EnvHFHubCacheLegacy} {
		t.Setenv(k, "")
	}
	t.Setenv(hfcache.EnvHFHome, home)
	t.Setenv("HF_HUB_OFFLINE", "1")
	base := boundsArgs(t)
	var worst uint64
	var worstCase string
	for cmd, flags := range numericFlagBounds {
		for name, b := range flags {
			for _, v := range b.refuse {
				args := append(slices.Clone(base[cmd]), "--"+name+"="+v)
				t.Run(cmd+" --"+name+" "+v, func(t *testing.T) {
					var before, after runtime.MemStats
					runtime.GC()
					runtime.ReadMemStats(&before)
					r := dgqRun(args...)
					runtime.ReadMemStats(&after)
					assertOneLineError(t, r, exitUsage, "--"+name)
					alloc := after.TotalAlloc - before.TotalAlloc
					if alloc > maxRefusalAlloc {
						t.Errorf("the refusal allocated %d bytes (more than %d)", alloc, maxRefusalAlloc)
					} else if alloc > worst {
						worst, worstCase = alloc, strings.Join(args, " ")
					}
					if cmd == "bench" && name == "prompt-len" && v == "1000000000" {
						t.Logf("the once out-of-memory case allocated %d bytes", alloc)
					}
				})
			}
		}
	}
	t.Logf("largest allocation of a refusal: %d bytes (dgq %s)", worst, worstCase)
	// The bound is the model's, and so is the message.
	r := dgqRun(append(base["bench"], "--prompt-len", "1000000000")...)
	assertOneLineError(t, r, exitUsage, "--prompt-len 1000000000 exceeds the model's maximum of 4096 positions")
	r = dgqRun(append(base["verify"], "--canvas", "100000")...)
	assertOneLineError(t, r, exitUsage, "--canvas 100000 exceeds the model's canvas of 16 positions")
	r = dgqRun(append(base["run"], "--max-new-tokens", "-5")...)
	assertOneLineError(t, r, exitUsage, "--max-new-tokens -5 is negative")
	if strings.Contains(r.stderr, "MaxNewTokens") {
		t.Errorf("the message names a Go field: %s", r.stderr)
	}
}

// TestMemoryEstimate: a run whose estimate exceeds --max-memory is refused
// in one line with the numbers (exit 2) before any weight is read; one
// within it runs.
func TestMemoryEstimate(t *testing.T) {
	q4 := demoPack(t, "q4")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := dgqRun("bench", q4, "--max-memory", "1000")
	runtime.ReadMemStats(&after)
	assertOneLineError(t, r, exitUsage, "not enough memory: the run needs an estimated")
	for _, part := range []string{"weights", "KV cache", "activations", "logits", "--max-memory"} {
		if !strings.Contains(r.stderr, part) {
			t.Errorf("the refusal does not name %q: %s", part, r.stderr)
		}
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > maxRefusalAlloc {
		t.Errorf("the refusal allocated %d bytes", alloc)
	}
	assertOneLineError(t, dgqRun("verify", q4, "--source", demoPack(t, "bf16"), "--max-memory", "10kB"), exitUsage, "not enough memory")
	assertOneLineError(t, dgqRun("run", q4, "--prompt", "hi", "--max-memory", "2KiB"), exitUsage, "not enough memory")
	if r := dgqRun("bench", q4, "--prompt-len", "8", "--canvas", "8", "--reps", "1", "--max-memory", "2GB"); r.code != 0 {
		t.Errorf("bench within --max-memory: exit %d: %s", r.code, r.stderr)
	}
}

// TestRunPromptPositions: the new tokens after the prompt as tokenized, in
// whole blocks, must fit the model's positions; the refusal names
// --max-new-tokens and the prompt's tokens.
func TestRunPromptPositions(t *testing.T) {
	q4 := demoPack(t, "q4")
	// 4080 new tokens (255 blocks of 16) fit after a one-token prompt, not
	// after this one's dozens of tokens.
	r := dgqRun("run", q4, "--prompt", "hello there, tell me a long story about the sea, the stars and the wind", "--max-new-tokens", "4080")
	assertOneLineError(t, r, exitUsage, "--max-new-tokens 4080 exceeds the model's maximum of 4096 positions after the prompt's")
}

// TestSynthRefusesTheCache: synth -o inside the Hugging Face cache is
// refused before anything is written.
func TestSynthRefusesTheCache(t *testing.T) {
	home := t.TempDir()
	for _, k := range []string{hfcache.EnvDGQHFHome, hfcache.EnvHFHubCache, hfcache.EnvHFHubCacheLegacy} {
		t.Setenv(k, "")
	}
	t.Setenv(hfcache.EnvHFHome, home)
	out := filepath.Join(home, "hub", "models--x--y", "snapshots", "z")
	assertOneLineError(t, dgqRun("synth", "-o", out, "--layers", "1"), exitUsage, "Hugging Face cache")
	if _, err := filepath.Glob(filepath.Join(home, "hub", "*")); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(home, "hub", "*")); len(m) != 0 {
		t.Errorf("synth wrote %v", m)
	}
}
