package check

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"slices"
	"unicode/utf8"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/internal/errclass"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/cpu"
	"github.com/dgq-dev/dgq/runtime/generate"
	"github.com/dgq-dev/dgq/runtime/model"
	"github.com/dgq-dev/dgq/runtime/session"
)

// Sentinels of Verify.
var (
	// ErrNoSource: the bf16 source to compare with cannot be found (none
	// recorded, the recorded folder is gone, or the recorded snapshot is not
	// in the hub cache — then the error also holds hfcache.ErrNotInCache and
	// classes as stale). The message names the fix.
	ErrNoSource = errclass.New(errclass.Usage, "verify: no source to compare with")
	// ErrSourceMismatch: the source is not the pack's model (another
	// config) or not bf16 (a quantized pack).
	ErrSourceMismatch = errclass.New(errclass.Usage, "verify: the source does not fit")
	// ErrVerifyOptions: an option is out of range (windows, lengths, noise
	// rates, the plot path's extension).
	ErrVerifyOptions = errclass.New(errclass.Usage, "verify: invalid options")
	// ErrText: the --text file cannot serve (not UTF-8, too short for one
	// window, or the pack has no tokenizer).
	ErrText = errclass.New(errclass.Invalid, "verify: unusable text")
	// ErrNoSpace: the temporary folder (--tmp, else $TMPDIR) has less free
	// space than the copy of a snapshot source needs; the message gives
	// both numbers.
	ErrNoSpace = errclass.New(errclass.IO, "verify: not enough free space for the source's copy")
)

// VerifyOptions configure Verify. Zero values take the defaults.
type VerifyOptions struct {
	// Source is what the pack is compared with: a bf16 (raw) pack folder, a
	// Hugging Face snapshot folder, or ORG/NAME[@REV] in the hub cache.
	// Empty: the source the pack records (a layered pack's base_model,
	// else dgq.source, else source_model).
	Source string
	// Text is a UTF-8 file of held-out text, tokenized with the pack's
	// tokenizer; empty: deterministic pseudo-random token windows.
	Text string
	// Windows is how many windows are measured, 1…MaxVerifyWindows (dgq
	// verify: VerifyWindows; fewer when the text holds fewer).
	Windows int
	// Prefix is the tokens prefilled before each canvas, bos included (≥ 1;
	// dgq verify: VerifyPrefix); Canvas the canvas positions, up to the
	// config's canvas_length (0: that). Prefix + Canvas must be within the
	// model's positions (max_position_embeddings).
	Prefix, Canvas int
	// NoiseRates are the fractions of the canvas corrupted (each in (0, 1];
	// default 0.25, 0.5, 0.75, 1).
	NoiseRates []float64
	// Generations is how many seeded generations run on both models
	// (default 2; negative: none). GenTokens is each one's new tokens
	// (default canvas_length: one block), GenSteps its max denoising steps
	// per block (default: the generation config's).
	Generations, GenTokens, GenSteps int
	// Seed seeds the random windows, the corruption, the generations and
	// the convergence bootstrap.
	Seed uint64
	// Rounding also measures the rounding KLD (VerifyReport.RoundingKLDMean):
	// the source is loaded a second time at the other precision and run on
	// the same windows, so the measurement costs about half again as much.
	Rounding bool
	// Sensitivity also measures, for each class the pack quantizes and for
	// each layer's expert banks, the source with only those tensors taken
	// from the pack (VerifyReport.Sensitivity): one more model per variant,
	// run on the same windows and generations ("sensitivity" phase on
	// Steps, counted in variants).
	Sensitivity bool
	// Plot, when set, is a .png file to write the chart to (checked before
	// any work, written at the end).
	Plot string
	// Load is how both models are loaded: the backend, its precision,
	// workers, SkipDigests. The source runs on the same backend.
	Load session.Options
	// Tmp is the folder in which a snapshot source's temporary bf16 pack is
	// made (removed at the end): "" is os.TempDir() ($TMPDIR). A snapshot
	// outside the hub cache is copied there whole, so its free space is
	// checked first (ErrNoSpace).
	Tmp string
	// Progress, when not nil, is told the copy of a snapshot source as it
	// runs (a progress bar on a terminal).
	Progress dgq.Progress
	// Steps, when not nil, is told the measurement as it runs, counted in
	// windows ("verify" phase; a progress bar on a terminal).
	Steps dgq.Progress
	// Notify, when not nil, is told what the user should know at once
	// while the run goes on, one line each: the copy of a snapshot source,
	// with its size and where it goes.
	Notify func(string)
}

// Defaults of VerifyOptions.
const (
	VerifyWindows     = 8
	VerifyPrefix      = 128
	VerifyGenerations = 2
)

// VerifyNoiseRates are the default noise rates.
var VerifyNoiseRates = []float64{0.25, 0.5, 0.75, 1}

// VerifyReport is the result of Verify (docs/cli.md, "dgq verify").
type VerifyReport struct {
	Pack string `json:"pack"`
	// Source is the folder compared with; SourceKind says what it is:
	// "pack" (a bf16 pack), "snapshot" (a bf16 layered pack made over the
	// cached snapshot for the run, no weight copied) or "snapshot_copy" (a
	// snapshot outside the hub cache, copied into a temporary bf16 pack).
	Source     string    `json:"source"`
	SourceKind string    `json:"source_kind"`
	Backend    string    `json:"backend"`
	Precision  string    `json:"precision"`
	Text       string    `json:"text"` // the file, or "random"
	Windows    int       `json:"windows"`
	Prefix     int       `json:"prefix"`
	Canvas     int       `json:"canvas"`
	NoiseRates []float64 `json:"noise_rates"`
	Seed       uint64    `json:"seed"`
	// Positions is the canvas positions compared: windows × noise rates ×
	// 2 (without and with self-conditioning) × canvas.
	Positions int `json:"positions"`
	// NonFinite counts positions left out because either model's logits
	// held a NaN or an infinity there.
	NonFinite int       `json:"non_finite"`
	KLD       VerifyKLD `json:"kld"`
	// Top1 is the fraction of positions whose argmax agrees.
	Top1 float64 `json:"top1_agreement"`
	// Accuracy is each model's fraction of positions whose argmax is the
	// true (uncorrupted) token.
	Accuracy VerifyPair    `json:"accuracy"`
	PerNoise []VerifyNoise `json:"per_noise"`
	// Layers holds the decoder's hidden states compared, entry 0 the
	// decoder input (embedding + self-conditioning, normed), entry i the
	// output of layer i, the last one final-normed.
	Layers     []VerifyLayer     `json:"layers"`
	Generation *VerifyGeneration `json:"generation"` // null when none ran
	// Convergence compares the generations' steps per block, null when no
	// block was committed by both models (or none ran).
	Convergence *VerifyConvergence `json:"convergence"`
	// RoundingKLDMean is the KLD of the source run in bf16 arithmetic
	// against itself in f32 on the same inputs (rounding alone), so every
	// pack's KLD reads as a multiple of it; null without Rounding, and on a
	// backend without bf16 arithmetic (then a note says why). KLDVsRounding is
	// KLD.Mean / RoundingKLDMean, null without it.
	RoundingKLDMean *float64 `json:"rounding_kld_mean"`
	KLDVsRounding   *float64 `json:"kld_vs_rounding"`
	// Sensitivity is each quantized class's cost alone, then each layer's
	// expert banks' (VerifySensitivity); null without Sensitivity, empty
	// when the pack quantizes nothing.
	Sensitivity []VerifySensitivity `json:"sensitivity"`
	Notes       []string            `json:"notes"`
	Plot        string              `json:"plot,omitempty"`
}

// VerifyKLD summarizes KL(source‖pack) over positions, in nats.
type VerifyKLD struct {
	Mean float64 `json:"mean"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

// VerifyPair is one quantity of each model.
type VerifyPair struct {
	Source float64 `json:"source"`
	Pack   float64 `json:"pack"`
}

// VerifyNoise is one (noise rate, self-conditioning) cell.
type VerifyNoise struct {
	Rate      float64 `json:"rate"`
	SC        bool    `json:"sc"`
	Positions int     `json:"positions"`
	KLDMean   float64 `json:"kld_mean"`
	KLDP99    float64 `json:"kld_p99"`
	KLDMax    float64 `json:"kld_max"`
	Top1      float64 `json:"top1"`
	AccSource float64 `json:"acc_source"`
	AccPack   float64 `json:"acc_pack"`
}

// VerifyLayer is one hidden state's comparison, mean over every denoise
// call measured. RouterAgreement is the fraction of (call, position) whose
// top-k expert sets are equal, nil when not measured (layer 0, or a
// backend other than the CPU's).
type VerifyLayer struct {
	Layer           int      `json:"layer"`
	RelErr          float64  `json:"rel_err"`
	Cosine          float64  `json:"cosine"`
	RouterAgreement *float64 `json:"router_agreement"`
}

// VerifyGeneration compares seeded generations of the two models.
type VerifyGeneration struct {
	Runs      int `json:"runs"`
	Tokens    int `json:"tokens"` // new tokens asked of each run
	Identical int `json:"identical"`
	// TokenAgreement is the fraction of committed tokens equal position by
	// position (a run's longer output counts its extra tokens as
	// disagreeing).
	TokenAgreement float64 `json:"token_agreement"`
	// StepsPerBlock is each model's mean denoising steps per committed
	// block (steps until the sampler's stop rule ends the block).
	StepsPerBlock VerifyPair `json:"steps_per_block"`
	// SettleSteps is each model's mean, over the positions of committed
	// blocks, of the step from which the position's argmax stayed what it
	// was at the block's last step (steps to converge, whatever the stop
	// rule: a model that converges later needs more steps before any rule
	// can stop it).
	SettleSteps VerifyPair `json:"settle_steps"`
}

// Verify runs the pack at packDir and its bf16 source on the same inputs
// and reports where the pack loses (VerifyReport): for each window (a
// prefix prefilled, then the true canvas corrupted at each noise rate),
// both models denoise without self-conditioning and then with the same SC
// logits (the source's first-pass logits over the generation's first
// temperature, t_max), so each step is measured alone; the logits give
// KL(source‖pack), top-1 agreement and each model's accuracy against the
// true tokens, the decoder's hidden states the per-layer relative error
// and cosine, and on backends that report routes (backend.RouteRecorder:
// CPU, CUDA) the router's top-k choices per layer. Then a few seeded generations of both are compared.
//
// Both models are loaded at once on the backend o.Load names. A snapshot
// source is turned into a temporary bf16 pack first (layered over the
// cached shards when it lies in the configured hub cache), removed at the
// end. Nothing is written but the plot, and that only on success.
func Verify(ctx context.Context, packDir string, o VerifyOptions) (*VerifyReport, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	packDir, err := dgq.ResolvePack(packDir)
	if err != nil {
		return nil, err
	}
	spec, err := session.ReadSpec(packDir)
	if err != nil {
		return nil, err
	}
	if err := o.checkSpec(spec); err != nil { // before either model is loaded
		return nil, err
	}
	src, err := resolveVerifySource(spec.Manifest, o.Source)
	if err != nil {
		return nil, err
	}
	if o.Plot != "" {
		if err := checkPlotPath(o.Plot, packDir, src.dir); err != nil {
			return nil, err
		}
	}
	if err := src.precheck(packDir); err != nil {
		return nil, err
	}
	var text []byte
	truncated := false
	if o.Text != "" {
		if text, truncated, err = readVerifyText(o.Text); err != nil {
			return nil, err
		}
	}
	ps, err := session.Load(ctx, packDir, o.Load) // its memory estimate counts both models
	if err != nil {
		return nil, err
	}
	defer ps.Close()
	o.Load.Workload = nil // the source's share was counted above
	ss, cleanup, err := src.load(ctx, o)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	defer ss.Close()
	if d := configDiff(ps.Model.Config(), ss.Model.Config()); d != "" {
		return nil, fmt.Errorf("%w: %s has another config than the pack (%s); pass the pack's own source", ErrSourceMismatch, src.dir, d)
	}
	rep := &VerifyReport{Pack: packDir, Source: src.dir, SourceKind: src.kind, Backend: ps.Engine.Backend().Name(),
		Precision: cmp.Or(o.Load.Precision, backend.F32), Text: cmp.Or(o.Text, "random"), Prefix: o.Prefix,
		NoiseRates: o.NoiseRates, Seed: o.Seed, Notes: []string{}}
	if truncated {
		rep.Notes = append(rep.Notes, fmt.Sprintf("only the first %d MiB of the text were read", maxVerifyText>>20))
	}
	if src.kind == "snapshot_copy" {
		rep.Notes = append(rep.Notes, "the source snapshot is outside the configured hub cache: it was copied into a temporary bf16 pack")
	}
	if rep.Canvas = o.Canvas; rep.Canvas == 0 {
		rep.Canvas = ps.Model.Config().CanvasLength
	}
	wins, err := verifyWindows(ps, text, o, rep)
	if err != nil {
		return nil, err
	}
	v := newVerifyRun(ps, ss, len(o.NoiseRates))
	if !v.routes {
		rep.Notes = append(rep.Notes, fmt.Sprintf("router agreement not measured: the %s backend does not record routes", rep.Backend))
	}
	steps := dgq.ProgressOrNop(o.Steps)
	steps.Start("verify", int64(len(wins)))
	for w, win := range wins {
		if err := v.window(ctx, w, win, o); err != nil {
			steps.Finish()
			return nil, err
		}
		steps.Add(1)
	}
	steps.Finish()
	v.acc.report(rep, v.routes)
	if o.Rounding {
		if rep.RoundingKLDMean, err = verifyRounding(ctx, ss, wins, o, v.T, rep); err != nil {
			return nil, err
		}
		if r := rep.RoundingKLDMean; r != nil && *r > 0 {
			x := rep.KLD.Mean / *r
			rep.KLDVsRounding = &x
		}
	}
	if o.Generations > 0 {
		if rep.Generation, rep.Convergence, err = verifyGenerate(ctx, ps, ss, wins, o); err != nil {
			return nil, err
		}
	}
	if o.Sensitivity {
		if rep.Sensitivity, err = verifySensitivity(ctx, ps, ss, wins, o, v.T); err != nil {
			return nil, err
		}
	}
	if o.Plot != "" {
		if err := writePlot(o.Plot, rep); err != nil {
			return nil, err
		}
		rep.Plot = o.Plot
	}
	return rep, nil
}

// defaults fills the zero options that have a default (Generations,
// NoiseRates) and refuses the out-of-range ones that need no pack
// (checkNumbers; Windows and Prefix have no zero default: 0 is refused).
func (o *VerifyOptions) defaults() error {
	o.Generations = cmp.Or(o.Generations, VerifyGenerations)
	if o.NoiseRates == nil {
		o.NoiseRates = VerifyNoiseRates
	}
	return o.checkNumbers()
}

// verifyWindow is one window: the prefix prefilled and the true canvas.
type verifyWindow struct {
	prefix, truth []int
}

// verifyWindows cuts the windows from the text (tokenized with the pack's
// tokenizer, bos in front of each prefix) or draws them at random.
func verifyWindows(ps *session.Session, text []byte, o VerifyOptions, rep *VerifyReport) ([]verifyWindow, error) {
	cfg := ps.Model.Config()
	V, P, C := cfg.Text.VocabSize, o.Prefix, rep.Canvas
	need := P - 1 + C // tokens of a window after bos
	var wins []verifyWindow
	if text == nil {
		rng := rand.New(rand.NewPCG(o.Seed, 0x7665726966792d77)) // "verify-w"
		lo := 3                                                  // no pad, eos or bos (ids 0–2) unless the vocabulary is that small
		if V <= lo {
			lo = 0
		}
		for range o.Windows {
			ids := make([]int, need)
			for i := range ids {
				ids[i] = lo + rng.IntN(V-lo)
			}
			wins = append(wins, verifyWindow{prefix: append([]int{cfg.Text.BOSTokenID}, ids[:P-1]...), truth: ids[P-1:]})
		}
		rep.Notes = append(rep.Notes, "no --text: the windows are pseudo-random tokens, so accuracy measures copying, not language")
	} else {
		if ps.Tokenizer == nil {
			return nil, fmt.Errorf("%w: %s carries no tokenizer.json to tokenize --text with", ErrText, ps.Pack.Dir)
		}
		ids := ps.Tokenizer.Encode(string(text), false)
		n := min(o.Windows, len(ids)/need)
		if n == 0 {
			return nil, fmt.Errorf("%w: %s holds %d tokens; one window needs %d (prefix %d − 1 bos + canvas %d): give a longer text or a shorter --prompt-len",
				ErrText, o.Text, len(ids), need, P, C)
		}
		if n < o.Windows {
			rep.Notes = append(rep.Notes, fmt.Sprintf("the text holds %d windows of %d tokens (%d asked)", n, need, o.Windows))
		}
		stride := len(ids) / n
		for w := range n {
			win := ids[w*stride : w*stride+need]
			if i := slices.IndexFunc(win, func(id int) bool { return id < 0 || id >= V }); i >= 0 {
				return nil, fmt.Errorf("%w: token id %d is outside the model's vocabulary of %d", ErrText, win[i], V)
			}
			wins = append(wins, verifyWindow{prefix: append([]int{cfg.Text.BOSTokenID}, win[:P-1]...), truth: slices.Clone(win[P-1:])})
		}
	}
	rep.Windows = len(wins)
	return wins, nil
}

// maxVerifyText is how much of a --text file is read.
const maxVerifyText = 4 << 20

// readVerifyText reads the first maxVerifyText bytes of a UTF-8 file (cut
// after its last whole line when longer); truncated says it was.
func readVerifyText(path string) (text []byte, truncated bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("%w: --text %s does not exist", ErrText, path) // invalid input, as a missing pack
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxVerifyText+1))
	if err != nil {
		return nil, false, err
	}
	if len(b) > maxVerifyText {
		b, truncated = b[:maxVerifyText], true
		if i := bytes.LastIndexByte(b, '\n'); i > 0 {
			b = b[:i+1]
		}
	}
	if !utf8.Valid(b) {
		return nil, false, fmt.Errorf("%w: %s is not UTF-8 text", ErrText, path)
	}
	return b, truncated, nil
}

// verifyRun holds the two engines of a Verify and what it accumulates.
type verifyRun struct {
	pe, se *model.Engine
	pr, sr backend.RouteRecorder // the engines' backends where they report routes (CPU, CUDA, Metal), nil otherwise
	routes bool
	T      float32 // the SC temperature: the generation's first (t_max)
	V      int
	acc    verifyAcc
	hs, hp [][]float32
	rs, rp backend.Routes
}

func newVerifyRun(ps, ss *session.Session, rates int) *verifyRun {
	v := &verifyRun{pe: ps.Engine, se: ss.Engine, V: ps.Model.Vocab(),
		T: generate.Temperature(ps.GenConfig, ps.GenConfig.MaxDenoisingSteps)}
	v.pr, _ = ps.Engine.Backend().(backend.RouteRecorder)
	v.sr, _ = ss.Engine.Backend().(backend.RouteRecorder)
	v.routes = v.pr != nil && v.sr != nil
	v.acc = newVerifyAcc(rates, ps.Model.Layers())
	return v
}

// window measures one window at every noise rate, without and with
// self-conditioning.
func (v *verifyRun) window(ctx context.Context, w int, win verifyWindow, o VerifyOptions) error {
	cs, cp := v.se.NewCache(), v.pe.NewCache()
	defer cs.Free()
	defer cp.Free()
	if err := v.se.Prefill(ctx, cs, win.prefix, nil); err != nil {
		return err
	}
	if err := v.pe.Prefill(ctx, cp, win.prefix, nil); err != nil {
		return err
	}
	for ri, rate := range o.NoiseRates {
		canvas := corrupt(win.truth, rate, v.V, rand.New(rand.NewPCG(o.Seed, uint64(w)<<16|uint64(ri))))
		var sc []float32
		for _, withSC := range []bool{false, true} {
			if err := ctx.Err(); err != nil {
				return err
			}
			zs, err := v.denoise(ctx, v.se, v.sr, cs, canvas, sc, &v.hs, &v.rs)
			if err != nil {
				return fmt.Errorf("verify: source: %w", err)
			}
			zp, err := v.denoise(ctx, v.pe, v.pr, cp, canvas, sc, &v.hp, &v.rp)
			if err != nil {
				return fmt.Errorf("verify: pack: %w", err)
			}
			if err := v.acc.measure(ctx, ri*2+boolIndex(withSC), zs, zp, win.truth, v.V); err != nil {
				return err
			}
			v.acc.layers(v.hs, v.hp)
			if v.routes {
				v.acc.routes(v.rs, v.rp)
			}
			if !withSC {
				sc = make([]float32, len(zs))
				cpu.TemperRow(zs, v.T, sc)
			}
		}
	}
	return nil
}

// denoise runs one measured denoise call, its hidden states into *hidden
// and, where both backends report routes, its routes into *r.
func (v *verifyRun) denoise(ctx context.Context, e *model.Engine, be backend.RouteRecorder, c *model.Cache, canvas []int, sc []float32, hidden *[][]float32, r *backend.Routes) ([]float32, error) {
	*hidden, r.Calls = (*hidden)[:0], r.Calls[:0]
	if be != nil && v.routes {
		be.RecordRoutes(r)
		defer be.RecordRoutes(nil)
	}
	return e.Denoise(ctx, c, canvas, sc, hidden)
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// corrupt returns truth with round(rate·C) positions (a random choice)
// replaced by uniform ids in [0, V), as the generation's initial canvas.
func corrupt(truth []int, rate float64, V int, rng *rand.Rand) []int {
	c := slices.Clone(truth)
	n := int(rate*float64(len(c)) + 0.5)
	for _, i := range rng.Perm(len(c))[:n] {
		c[i] = rng.IntN(V)
	}
	return c
}

// verifyGenerate runs o.Generations seeded generations on both models, the
// prompts the windows' prefixes in turn, and compares them: the tokens and
// mean steps (VerifyGeneration) and block by block the steps to converge
// (VerifyConvergence, nil when no block pair was committed).
func verifyGenerate(ctx context.Context, ps, ss *session.Session, wins []verifyWindow, o VerifyOptions) (*VerifyGeneration, *VerifyConvergence, error) {
	tokens := cmp.Or(o.GenTokens, ps.Model.Config().CanvasLength)
	g := &VerifyGeneration{Runs: o.Generations, Tokens: tokens}
	var conv convergeAcc
	var agree, total int
	var blocks, steps, positions [2]int
	var settle [2]float64
	for i := range o.Generations {
		prompt := wins[i%len(wins)].prefix
		var out [2]*generate.Generation
		var traced [2]blockTrace
		for j, e := range []*model.Engine{ss.Engine, ps.Engine} {
			opt := generate.Options{Seed: o.Seed + uint64(i), MaxNewTokens: tokens, MaxSteps: o.GenSteps}
			settled := &traced[j]
			opt.Trace = settled.step
			r, err := generate.Generate(ctx, e, prompt, ps.GenConfig, opt)
			if err != nil {
				return nil, nil, fmt.Errorf("verify: generation %d: %w", i, err)
			}
			out[j] = r
			blocks[j] += r.Blocks
			steps[j] += r.Steps
			n, sum := settled.total(r.Blocks)
			positions[j] += n
			settle[j] += sum
		}
		conv.add(&traced[0], &traced[1], out[0].Blocks, out[1].Blocks)
		a, b := out[0].Tokens, out[1].Tokens
		if slices.Equal(a, b) {
			g.Identical++
		}
		for k := range min(len(a), len(b)) {
			if a[k] == b[k] {
				agree++
			}
		}
		total += max(len(a), len(b))
	}
	g.TokenAgreement = ratio(agree, total)
	g.StepsPerBlock = VerifyPair{Source: ratio(steps[0], blocks[0]), Pack: ratio(steps[1], blocks[1])}
	g.SettleSteps = VerifyPair{Source: settle[0] / float64(max(positions[0], 1)), Pack: settle[1] / float64(max(positions[1], 1))}
	return g, conv.report(o.Seed, cmp.Or(o.GenSteps, ps.GenConfig.MaxDenoisingSteps)), nil
}

// settleSteps tracks, per block and position, the step from which the
// position's argmax has not changed (generate.Options.Trace).
type settleSteps struct {
	last [][]int // block → the previous step's argmax canvas
	from [][]int // block → per position, the first step of its current run
}

func (s *settleSteps) step(st generate.StepTrace) {
	for len(s.from) <= st.Block {
		s.from, s.last = append(s.from, nil), append(s.last, nil)
	}
	b := st.Block
	if s.from[b] == nil { // a block's first step (or a rerolled block's)
		s.from[b] = make([]int, len(st.Argmax))
		s.last[b] = nil
	}
	for i, id := range st.Argmax {
		if s.last[b] == nil || s.last[b][i] != id || st.Step == 1 {
			s.from[b][i] = st.Step
		}
	}
	s.last[b] = st.Argmax
}

// total returns the positions of the first blocks blocks and the sum of
// their settle steps.
func (s *settleSteps) total(blocks int) (int, float64) {
	n, sum := 0, 0.0
	for b := range min(blocks, len(s.from)) {
		for _, k := range s.from[b] {
			n++
			sum += float64(k)
		}
	}
	return n, sum
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
