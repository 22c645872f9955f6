package calibrate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/dgq/limits"
	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/internal/errclass"
	"github.com/dgq-dev/dgq/layout"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/cpu"
	"github.com/dgq-dev/dgq/runtime/generate"
	"github.com/dgq-dev/dgq/runtime/session"
)

// Sentinels of Run.
var (
	// ErrOptions: an option is out of range, OUT exists (without Force),
	// lies in the Hugging Face cache or is not a .safetensors file.
	ErrOptions = errclass.New(errclass.Usage, "calibrate: invalid options")
	// ErrNotBF16: the source holds quantized tensors: calibrating them
	// would measure another model than the one quantization starts from.
	ErrNotBF16 = errclass.New(errclass.Usage, "calibrate: the source is not bf16")
	// ErrText: the text is too short for one window (the message gives
	// the numbers), or the pack has no tokenizer.
	ErrText = errclass.New(errclass.Usage, "calibrate: unusable text")
	// ErrTextFile: the text file does not exist or is not UTF-8.
	ErrTextFile = errclass.New(errclass.Invalid, "calibrate: unusable text file")
)

// Defaults and bounds of Options.
const (
	DefaultWindows   = 32
	DefaultPromptLen = 128
	MaxWindows       = 4096
	// maxText is how much of the text file is read.
	maxText = 64 << 20
)

// NoiseRates are the canvases' corruption rates (dgq verify's defaults).
var NoiseRates = []float64{0.25, 0.5, 0.75, 1}

// Options configure Run.
type Options struct {
	// Source is a bf16 pack folder, ORG/NAME[@REV] of a cached pack or
	// snapshot, or a Hugging Face snapshot folder (made into a temporary
	// bf16 pack first, as dgq verify does).
	Source string
	// Text is the UTF-8 calibration text (required).
	Text string
	// Out is the .safetensors file written; Force overwrites it.
	Out   string
	Force bool
	// Windows (1…MaxWindows) and PromptLen (the clean prefix, bos
	// included, ≥ 1) have no zero default (dgq calibrate's defaults are
	// DefaultWindows and DefaultPromptLen): 0 is refused.
	Windows, PromptLen int
	// Seed seeds the corruption of the canvases.
	Seed uint64
	// Load is the backend, precision and workers.
	Load session.Options
	// Tmp is where a snapshot's temporary bf16 pack is made ("" = $TMPDIR).
	Tmp string
	// Progress is told the snapshot's conversion; Steps the windows.
	Progress, Steps dgq.Progress
	// Notify, when not nil, is told the one line announcing the copy of a
	// snapshot outside the hub cache (its size and where it goes).
	Notify func(string)
}

// Result describes the file written (dgq calibrate --json).
type Result struct {
	Path       string     `json:"path"`
	Source     string     `json:"source"`
	SourceKind string     `json:"source_kind"` // "pack", "snapshot" (layered over the cache) or "snapshot_copy"
	Backend    string     `json:"backend"`
	Tensors    int        `json:"tensors"`
	Windows    int        `json:"windows"`
	PromptLen  int        `json:"prompt_len"`
	Canvas     int        `json:"canvas"`
	NoiseRates []float64  `json:"noise_rates"`
	Seed       uint64     `json:"seed"`
	Positions  int        `json:"positions"`
	TextSHA256 string     `json:"text_sha256"`
	Coverage   []Coverage `json:"coverage"`
	// Unreached names the tensors no row reached (written with in_sum2 0
	// and counts 0: unweighted), e.g. the vision tower's.
	Unreached []string `json:"unreached"`
	// Warnings are the lines the user must see: layers with experts no
	// row was routed to.
	Warnings []string `json:"warnings"`
	Elapsed  float64  `json:"elapsed_s"`
}

// Coverage is one MoE layer's expert coverage.
type Coverage struct {
	Layer          int `json:"layer"`
	ExpertsReached int `json:"experts_reached"`
	Experts        int `json:"experts"`
	MinCount       int `json:"min_count"`
}

// Run measures the importance matrix of the source on the text and writes
// it to o.Out (docs/format.md, "The imatrix file").
func Run(ctx context.Context, o Options) (*Result, error) {
	t0 := time.Now()
	if err := limits.First(ErrOptions,
		o.Load.Validate(),
		limits.Min("--windows", o.Windows, 1),
		limits.Max("--windows", o.Windows, MaxWindows, fmt.Sprintf("the maximum of %d windows", MaxWindows)),
		limits.Min("--prompt-len", o.PromptLen, 1),
	); err != nil {
		return nil, err
	}
	if err := checkOut(o.Out, o.Force); err != nil {
		return nil, err
	}
	if o.Text == "" {
		return nil, fmt.Errorf("%w: --text FILE is required", ErrOptions)
	}
	text, err := readText(o.Text)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(text)
	src, cleanup, err := resolveSource(ctx, o)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	spec, err := session.ReadSpec(src.dir)
	if err != nil {
		return nil, err
	}
	if err := checkBF16(src.dir, spec.Manifest); err != nil {
		return nil, err
	}
	C := spec.Config.CanvasLength
	P := o.PromptLen
	if err := spec.CheckPositions("--prompt-len", P, P+C, fmt.Sprintf("with a canvas of %d", C)); err != nil {
		return nil, err
	}
	shapes, quantized := quantizable(spec.Manifest)
	var rec *recorder
	lo := o.Load
	lo.Workload = &session.Workload{Prefill: P, Canvas: C, Positions: P + C, Host: 8 * int64(P+C)}
	lo.Wrap = func(b backend.Backend) backend.Backend {
		rec = newRecorder(b, func(n string) bool { return quantized[n] })
		return rec
	}
	lo.SkipDigests = lo.SkipDigests || src.kind == "snapshot" // just written and hashed
	s, err := session.Load(ctx, src.dir, lo)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if s.Tokenizer == nil {
		return nil, fmt.Errorf("%w: %s carries no tokenizer.json to tokenize --text with", ErrText, src.dir)
	}
	wins, err := windows(s.Tokenizer.Encode(string(text), false), o, P, C, s.Model.Vocab(), s.Model.Config().Text.BOSTokenID)
	if err != nil {
		return nil, err
	}
	res := &Result{Path: o.Out, Source: src.origin, SourceKind: src.kind, Backend: s.Engine.Backend().Name(),
		Windows: len(wins), PromptLen: P, Canvas: C, NoiseRates: NoiseRates, Seed: o.Seed,
		TextSHA256: hex.EncodeToString(sum[:]), Unreached: []string{}, Warnings: []string{}, Coverage: []Coverage{}}
	T := generate.Temperature(s.GenConfig, s.GenConfig.MaxDenoisingSteps)
	V := s.Model.Vocab()
	steps := dgq.ProgressOrNop(o.Steps)
	steps.Start("calibrate", int64(len(wins)))
	rec.on = true
	for w, win := range wins {
		if err := ctx.Err(); err != nil {
			steps.Finish()
			return nil, err
		}
		if err := runWindow(ctx, s, win, w, o.Seed, T, V); err != nil {
			steps.Finish()
			return nil, err
		}
		res.Positions += P + 2*len(NoiseRates)*C
		steps.Add(1)
	}
	steps.Finish()
	rec.on = false
	meta := map[string]string{
		"dgq_version": dgq.Version, "text_sha256": res.TextSHA256,
		"windows": strconv.Itoa(res.Windows), "positions": strconv.Itoa(res.Positions),
		"prompt_len": strconv.Itoa(P), "canvas": strconv.Itoa(C), "noise_rates": formatRates(NoiseRates),
		"self_conditioning": "off,on", "seed": strconv.FormatUint(o.Seed, 10), "backend": res.Backend,
	}
	if repo, rev := src.repo, src.revision; repo != "" {
		meta["source_repo"], meta["source_revision"] = repo, rev
	} else if ref := sourceRef(spec.Manifest); ref != nil {
		meta["source_repo"], meta["source_revision"] = ref.Repo, ref.Revision
	}
	stats := make([]*stat, 0, len(shapes))
	for _, name := range slices.Sorted(maps.Keys(shapes)) {
		st := rec.stats[name]
		if st == nil { // never bound by the engine (the vision tower)
			sh := shapes[name]
			if len(sh) == 3 {
				st = newStat(name, int(sh[0]), int(sh[2]))
			} else {
				st = newStat(name, 1, int(sh[len(sh)-1]))
			}
		}
		if !slices.ContainsFunc(st.counts, func(c float64) bool { return c > 0 }) {
			res.Unreached = append(res.Unreached, name)
		}
		stats = append(stats, st)
	}
	res.Tensors = len(stats)
	res.Coverage, res.Warnings = coverage(stats)
	if res.Windows < o.Windows {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the text holds %d windows of %d tokens (%d asked): a longer text measures more", res.Windows, P-1+C, o.Windows))
	}
	if len(res.Unreached) > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d tensors were reached by no row (written unweighted: in_sum2 0, counts 0): %s",
			len(res.Unreached), abbreviate(res.Unreached, 4)))
	}
	if err := writeImatrix(o.Out, stats, meta); err != nil {
		return nil, err
	}
	res.Elapsed = time.Since(t0).Seconds()
	return res, nil
}

// runWindow prefills one window's prefix, then denoises its canvas
// corrupted at each noise rate without and with self-conditioning (the SC
// logits: the first pass's, tempered at t_max), as dgq verify does.
func runWindow(ctx context.Context, s *session.Session, win window, w int, seed uint64, T float32, V int) error {
	e := s.Engine
	c := e.NewCache()
	defer c.Free()
	if err := e.Prefill(ctx, c, win.prefix, nil); err != nil {
		return err
	}
	for ri, rate := range NoiseRates {
		canvas := corrupt(win.truth, rate, V, rand.New(rand.NewPCG(seed, uint64(w)<<16|uint64(ri))))
		z, err := e.Denoise(ctx, c, canvas, nil, nil)
		if err != nil {
			return err
		}
		sc := make([]float32, len(z))
		cpu.TemperRow(z, T, sc)
		if _, err := e.Denoise(ctx, c, canvas, sc, nil); err != nil {
			return err
		}
	}
	return nil
}

// corrupt is dgq verify's: round(rate·C) positions replaced by uniform ids.
func corrupt(truth []int, rate float64, V int, rng *rand.Rand) []int {
	c := slices.Clone(truth)
	n := int(rate*float64(len(c)) + 0.5)
	for _, i := range rng.Perm(len(c))[:n] {
		c[i] = rng.IntN(V)
	}
	return c
}

type window struct{ prefix, truth []int }

// windows cuts up to o.Windows windows of P−1+C tokens, evenly spaced, from
// the tokenized text (bos in front of each prefix).
func windows(ids []int, o Options, P, C, V, bos int) ([]window, error) {
	need := P - 1 + C
	n := min(o.Windows, len(ids)/need)
	if n == 0 {
		return nil, fmt.Errorf("%w: %s holds %d tokens; one window needs %d (prompt-len %d − 1 bos + canvas %d): give a longer text or a shorter --prompt-len",
			ErrText, o.Text, len(ids), need, P, C)
	}
	stride := len(ids) / n
	var out []window
	for w := range n {
		win := ids[w*stride : w*stride+need]
		if i := slices.IndexFunc(win, func(id int) bool { return id < 0 || id >= V }); i >= 0 {
			return nil, fmt.Errorf("%w: token id %d is outside the model's vocabulary of %d", ErrText, win[i], V)
		}
		out = append(out, window{prefix: append([]int{bos}, win[:P-1]...), truth: slices.Clone(win[P-1:])})
	}
	return out, nil
}

// readText reads the text (up to maxText bytes: cut at the last line).
func readText(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: --text %s does not exist", ErrTextFile, path)
	}
	if err != nil {
		return nil, err
	}
	if len(b) > maxText {
		b = b[:maxText]
		if i := strings.LastIndexByte(string(b), '\n'); i > 0 {
			b = b[:i+1]
		}
	}
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("%w: %s is not UTF-8 text", ErrTextFile, path)
	}
	return b, nil
}

// checkOut refuses an OUT that is not .safetensors, lies in the Hugging
// Face cache, or exists (without force).
func checkOut(out string, force bool) error {
	switch {
	case out == "":
		return fmt.Errorf("%w: -o OUT.imatrix.safetensors is required", ErrOptions)
	case !strings.HasSuffix(out, ".safetensors"):
		return fmt.Errorf("%w: -o %s: the imatrix is a .safetensors file", ErrOptions, out)
	case hfcache.IsInCache(out):
		return fmt.Errorf("%w: -o %s lies inside the Hugging Face cache, which dgq never writes to; pick another folder", ErrOptions, out)
	}
	if st, err := os.Stat(filepath.Dir(out)); err != nil || !st.IsDir() {
		return fmt.Errorf("%w: -o %s: its folder %s does not exist", ErrOptions, out, filepath.Dir(out))
	}
	if st, err := os.Stat(out); err == nil {
		if st.IsDir() {
			return fmt.Errorf("%w: -o %s is a folder", ErrOptions, out)
		}
		if !force {
			return fmt.Errorf("%w: -o %s exists; pass --force to overwrite it", ErrOptions, out)
		}
	}
	return nil
}

// checkBF16 refuses a pack holding any quantized tensor.
func checkBF16(dir string, m *dgq.Manifest) error {
	for _, t := range m.Tensors {
		if t.Format != codecs.Raw {
			return fmt.Errorf("%w: %s holds %s tensors (%s): calibrate measures the bf16 model; pass a bf16 pack or the snapshot",
				ErrNotBF16, dir, t.Format, t.Name)
		}
	}
	return nil
}

// quantizable returns the shapes of the tensors whose class can be
// quantized (experts, attn, dense, sc, vision: not the locked ones, the
// embedding among them).
func quantizable(m *dgq.Manifest) (map[string][]int64, map[string]bool) {
	shapes, set := map[string][]int64{}, map[string]bool{}
	for _, t := range m.Tensors {
		c := t.Class
		if !c.Valid() {
			c, _, _ = layout.Classify(t.Name, len(t.Shape))
		}
		if !c.Valid() || c.Locked() || len(t.Shape) < 2 || len(t.Shape) > 3 {
			continue
		}
		shapes[t.Name], set[t.Name] = t.Shape, true
	}
	return shapes, set
}

func sourceRef(m *dgq.Manifest) *dgq.BaseModel {
	if m.BaseModel != nil {
		return m.BaseModel
	}
	if m.DGQ != nil {
		return m.DGQ.Source
	}
	return nil
}

var layerRE = regexp.MustCompile(`\.layers\.(\d+)\.`)

// coverage reports each MoE layer's expert coverage from its first expert
// bank (gate_up and down see the same routes) and a warning naming the
// layers with unreached experts.
func coverage(stats []*stat) ([]Coverage, []string) {
	byLayer := map[int]Coverage{}
	for _, s := range stats {
		if s.experts == 1 {
			continue
		}
		m := layerRE.FindStringSubmatch(s.name)
		if m == nil {
			continue
		}
		l, _ := strconv.Atoi(m[1])
		if _, ok := byLayer[l]; ok {
			continue
		}
		c := Coverage{Layer: l, Experts: s.experts, MinCount: -1}
		for _, n := range s.counts {
			if n > 0 {
				c.ExpertsReached++
			}
			if c.MinCount < 0 || int(n) < c.MinCount {
				c.MinCount = int(n)
			}
		}
		byLayer[l] = c
	}
	out := []Coverage{}
	var short []string
	for _, l := range slices.Sorted(maps.Keys(byLayer)) {
		c := byLayer[l]
		out = append(out, c)
		if c.ExpertsReached < c.Experts {
			short = append(short, fmt.Sprintf("%d (%d of %d)", l, c.ExpertsReached, c.Experts))
		}
	}
	var warn []string
	if len(short) > 0 {
		warn = append(warn, fmt.Sprintf("experts no row was routed to (written unweighted: in_sum2 0, counts 0) in layers %s; a longer or more varied --text reaches more",
			strings.Join(short, ", ")))
	}
	return out, warn
}

func abbreviate(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + fmt.Sprintf(" and %d more", len(names)-n)
}

func formatRates(r []float64) string {
	s := make([]string, len(r))
	for i, v := range r {
		s[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}
