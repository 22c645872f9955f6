package check

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/dgq/testmodel"
	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/cpu"
	"github.com/dgq-dev/dgq/runtime/generate"
	"github.com/dgq-dev/dgq/runtime/session"
)

// SmokeCheck is one check of the smoke battery. Pass is true only for a
// check that ran and passed; a skipped check (Skipped) has no verdict: its
// JSON says "pass": null, "judged": false.
type SmokeCheck struct {
	Name    string  `json:"name"`
	Pass    bool    `json:"pass"`
	Skipped bool    `json:"skipped,omitempty"`
	Detail  string  `json:"detail"`
	Seconds float64 `json:"seconds"`
}

// MarshalJSON writes the check with "pass" null and "judged" false when it
// was skipped (no verdict), "judged" true otherwise.
func (c SmokeCheck) MarshalJSON() ([]byte, error) {
	var pass *bool
	if !c.Skipped {
		pass = &c.Pass
	}
	return json.Marshal(struct {
		Name    string  `json:"name"`
		Pass    *bool   `json:"pass"`
		Judged  bool    `json:"judged"`
		Skipped bool    `json:"skipped,omitempty"`
		Detail  string  `json:"detail"`
		Seconds float64 `json:"seconds"`
	}{c.Name, pass, !c.Skipped, c.Skipped, c.Detail, c.Seconds})
}

// SmokeReport is the result of Smoke: Pass when no check failed.
type SmokeReport struct {
	Pass                bool         `json:"pass"`
	Checks              []SmokeCheck `json:"checks"`
	LoadSeconds         float64      `json:"load_seconds"`
	PrefillTokensPerSec float64      `json:"prefill_tokens_per_sec"`
	DenoiseStepMillis   float64      `json:"denoise_step_ms"`
}

// SmokeOptions configures Smoke.
type SmokeOptions struct {
	// Load is how the pack is loaded: the backend and precision every check
	// runs on, the cpu backend's workers, and SkipDigests (the load check
	// then trusts the pack's digests).
	Load      session.Options
	Reference string // reference.safetensors (or its directory); default: found from the pack's source
	Seed      uint64
	// Tmp, Progress, Steps and Notify are the verify check's
	// (VerifyOptions): where a snapshot source's temporary bf16 pack is
	// made, the progress of its copy and of the measurement, and the line
	// announcing the copy.
	Tmp      string
	Progress dgq.Progress
	Steps    dgq.Progress
	Notify   func(string)
}

// smokePrompt is the fixed prompt of the battery.
const smokePrompt = "Write one sentence about the sea."

// Smoke runs a fixed battery on a pack: it loads (every digest verified),
// checks that prefill and denoise logits are finite everywhere, that
// generation is deterministic at a fixed seed, that the reply decodes, and
// parity against a transformers reference when one is known for the pack's
// source, and a short Verify against its bf16 source when that is at hand;
// it times prefill and a denoise step. When ctx ends the battery, Smoke
// returns no report and an error wrapping ctx.Err() naming the check it
// stopped: an interruption is never a failed check.
func Smoke(ctx context.Context, dir string, o SmokeOptions) (*SmokeReport, error) {
	if o.Reference != "" {
		if err := CheckReference(o.Reference); err != nil {
			return nil, err // a reference given must exist: refused before the pack is loaded
		}
	}
	if err := smokeLoad(dir, &o); err != nil {
		return nil, err // every number checked before the pack is loaded
	}
	rep := &SmokeReport{Pass: true}
	add := func(c SmokeCheck) {
		rep.Checks = append(rep.Checks, c)
		rep.Pass = rep.Pass && (c.Pass || c.Skipped)
	}
	start := time.Now()
	s, err := session.Load(ctx, dir, o.Load)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	rep.LoadSeconds = time.Since(start).Seconds()
	digests := "every digest verified"
	if o.Load.SkipDigests {
		digests = "digests trusted (--skip-digests)"
	}
	add(SmokeCheck{Name: "load", Pass: true, Detail: fmt.Sprintf("%d tensors bound, %s", len(s.Pack.Manifest.Tensors), digests), Seconds: rep.LoadSeconds})
	bounds := DefaultBounds()
	if o.Load.Precision == backend.BF16 { // as ParityRun
		bounds.VsCPU, bounds.BF16 = VsCPUBF16, true
	}
	for _, check := range []func() SmokeCheck{
		func() SmokeCheck { return smokeFinite(ctx, s, rep) },
		func() SmokeCheck { return smokeDeterminism(ctx, s, o.Seed) },
		func() SmokeCheck { return smokeParity(ctx, s, o.Reference, bounds) },
		func() SmokeCheck { return smokeVerify(ctx, dir, s, o) },
	} {
		c := check()
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("smoke: interrupted in the %s check: %w", c.Name, err)
		}
		add(c)
	}
	return rep, nil
}

// smokeVerify runs a short Verify against the pack's recorded bf16 source
// when that source is at hand: every position's logits must be finite on
// both, and a bf16 pack must compute exactly its source (KLD 0).
func smokeVerify(ctx context.Context, dir string, s *session.Session, o SmokeOptions) SmokeCheck {
	c := SmokeCheck{Name: "verify"}
	if _, err := resolveVerifySource(s.Pack.Manifest, ""); err != nil {
		c.Skipped, c.Detail = true, "the pack's bf16 source is not at hand ("+err.Error()+")"
		return c
	}
	t0 := time.Now()
	r, err := Verify(ctx, dir, VerifyOptions{Windows: 2, Prefix: VerifyPrefix, Generations: -1, Seed: o.Seed, Tmp: o.Tmp, Progress: o.Progress, Steps: o.Steps, Notify: o.Notify,
		Load: session.Options{Workers: o.Load.Workers, Backend: o.Load.Backend, Precision: o.Load.Precision, SkipDigests: true, MaxMemory: o.Load.MaxMemory}}) // the smoke's load verified them (or trusted them)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	c.Seconds = time.Since(t0).Seconds()
	c.Detail = fmt.Sprintf("against %s: KLD mean %.3g, p99 %.3g, max %.3g nats; top-1 agreement %.3f over %d positions",
		r.Source, r.KLD.Mean, r.KLD.P99, r.KLD.Max, r.Top1, r.Positions)
	switch {
	case r.NonFinite > 0:
		c.Detail += fmt.Sprintf("; %d positions with non-finite logits", r.NonFinite)
	case s.Model.WeightFormat() == codecs.Raw && r.KLD.Max != 0:
		c.Detail += "; a bf16 pack must compute its source exactly"
	default:
		c.Pass = true
	}
	return c
}

// smokeFinite prefills the prompt and runs two denoise steps (without and
// with self-conditioning); every logit must be finite.
func smokeFinite(ctx context.Context, s *session.Session, rep *SmokeReport) SmokeCheck {
	c := SmokeCheck{Name: "finite_logits"}
	cfg := s.Model.Config()
	prompt := smokeIDs(s)
	e := s.Engine
	cache := e.NewCache()
	defer cache.Free()
	t0 := time.Now()
	if err := e.Prefill(ctx, cache, prompt, nil); err != nil {
		c.Detail = err.Error()
		return c
	}
	prefill := time.Since(t0)
	rep.PrefillTokensPerSec = float64(len(prompt)) / prefill.Seconds()
	canvas := make([]int, cfg.CanvasLength)
	for i := range canvas {
		canvas[i] = (i*7919 + 13) % cfg.Text.VocabSize
	}
	t1 := time.Now()
	logits, err := e.Denoise(ctx, cache, canvas, nil, nil)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	rep.DenoiseStepMillis = float64(time.Since(t1).Microseconds()) / 1000
	sc := make([]float32, len(logits))
	T := generate.Temperature(s.GenConfig, s.GenConfig.MaxDenoisingSteps)
	for r := 0; r < len(canvas); r++ {
		cpu.TemperRow(logits[r*cfg.Text.VocabSize:(r+1)*cfg.Text.VocabSize], T, sc[r*cfg.Text.VocabSize:(r+1)*cfg.Text.VocabSize])
	}
	logits2, err := e.Denoise(ctx, cache, canvas, sc, nil)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	for _, set := range [][]float32{logits, logits2} {
		for i, v := range set {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				c.Detail = fmt.Sprintf("logit %d is %v", i, v)
				return c
			}
		}
	}
	c.Pass = true
	c.Seconds = time.Since(t0).Seconds()
	c.Detail = fmt.Sprintf("prefill of %d tokens and 2 denoise steps over %d positions: all %d logits finite", len(prompt), len(canvas), len(logits)+len(logits2))
	return c
}

// smokeIDs is the battery's prompt: the chat-formatted sentence when the
// pack has a tokenizer, else a fixed id sequence.
func smokeIDs(s *session.Session) []int {
	if s.Tokenizer != nil {
		if ids, err := s.Tokenizer.Chat(smokePrompt, s.TokenizerConfig); err == nil {
			return ids
		}
	}
	v := s.Model.Config().Text.VocabSize
	ids := []int{2}
	for i := 0; i < 15; i++ {
		ids = append(ids, 3+(i*31)%(v-3))
	}
	return ids
}

// smokeDeterminism generates one block twice at the same seed (few steps)
// and checks the tokens are identical and the reply decodes.
func smokeDeterminism(ctx context.Context, s *session.Session, seed uint64) SmokeCheck {
	c := SmokeCheck{Name: "deterministic_generation"}
	t0 := time.Now()
	o := generate.Options{Seed: seed, MaxNewTokens: s.Model.Config().CanvasLength, MaxSteps: 8}
	var runs [2]*generate.Generation
	for i := range runs {
		g, err := s.Generate(ctx, smokeIDs(s), o)
		if err != nil {
			c.Detail = err.Error()
			return c
		}
		runs[i] = g
	}
	if !slices.Equal(runs[0].Tokens, runs[1].Tokens) {
		c.Detail = "two runs at one seed gave different tokens"
		return c
	}
	c.Seconds = time.Since(t0).Seconds()
	detail := fmt.Sprintf("%d tokens identical across two runs (seed %d, %d steps)", len(runs[0].Tokens), seed, runs[0].Steps)
	if s.Tokenizer != nil {
		reply := s.Tokenizer.Decode(s.ReplyTokens(runs[0].Tokens), true)
		if !utf8.ValidString(reply) {
			c.Detail = "the reply does not decode to valid UTF-8"
			return c
		}
		detail += fmt.Sprintf("; reply decodes (%d bytes)", len(reply))
	}
	c.Pass, c.Detail = true, detail
	return c
}

// smokeParity compares with a transformers reference when one is given or
// known for the pack's source.
func smokeParity(ctx context.Context, s *session.Session, ref string, bounds Bounds) SmokeCheck {
	c := SmokeCheck{Name: "parity"}
	if ref == "" {
		var cleanup func()
		ref, cleanup = FindReference(s.Pack.Manifest)
		defer cleanup()
	}
	if ref == "" {
		c.Skipped, c.Detail = true, "no transformers reference known for this pack's source (pass --reference)"
		return c
	}
	t0 := time.Now()
	r, err := Parity(ctx, s.Engine, ref, bounds)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	c.Seconds = time.Since(t0).Seconds()
	if !r.Judged {
		c.Skipped, c.Detail = true, "no verdict against the reference: "+r.NoVerdict
		return c
	}
	worst := ""
	for _, pc := range r.Cases {
		if !pc.Pass && worst == "" {
			worst = fmt.Sprintf("; %s fails: max abs err %.3g > %.3g", pc.Name, pc.MaxAbsErr, pc.Tolerance)
		}
	}
	c.Pass = r.Pass
	c.Detail = fmt.Sprintf("%d reference tensors compared (%s-anchored)%s", len(r.Cases), r.Anchor, worst)
	return c
}

// FindReference locates a transformers reference for the pack's source: the
// embedded tiny checkpoint's, or a reference.safetensors + reference.json
// beside the source snapshot (the fixture layout puts them above hub/) whose
// reference.json names the same repo and revision. It returns "" when none is
// known, and a cleanup function to call when done.
func FindReference(m *dgq.Manifest) (string, func()) {
	nop := func() {}
	embedded := false
	for _, t := range m.Tensors {
		embedded = embedded || (t.Name == "model.decoder.embed_tokens.weight" && t.Digest == testmodel.EmbedDigest)
	}
	if embedded {
		dir, err := os.MkdirTemp("", "dgq-reference-")
		if err != nil {
			return "", nop
		}
		if err := testmodel.WriteReference(dir); err != nil {
			os.RemoveAll(dir)
			return "", nop
		}
		return dir, func() { os.RemoveAll(dir) }
	}
	if m.DGQ == nil || m.DGQ.Source == nil {
		return "", nop
	}
	src := m.DGQ.Source
	root, _ := hfcache.CacheRoot()
	res, err := hfcache.Resolve(root, hfcache.RepoRef{Repo: src.Repo, Revision: src.Revision})
	if err != nil {
		return "", nop
	}
	dir := res.Dir
	for i := 0; i < 6; i++ {
		dir = filepath.Dir(dir)
		b, err := os.ReadFile(filepath.Join(dir, "reference.json"))
		if err != nil {
			continue
		}
		var meta struct{ Repo, Revision string }
		if json.Unmarshal(b, &meta) == nil && meta.Repo == src.Repo && meta.Revision == src.Revision {
			return dir, nop
		}
	}
	return "", nop
}
