package session

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"
	"unicode/utf8"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/dgq/limits"
	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/internal/errclass"
	"github.com/dgq-dev/dgq/layout"
	"github.com/dgq-dev/dgq/overlay"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/cpu" // also registers the "cpu" backend
	"github.com/dgq-dev/dgq/runtime/generate"
	"github.com/dgq-dev/dgq/runtime/model"
	"github.com/dgq-dev/dgq/runtime/tokenizer"
)

// ErrRun: the pack cannot serve the request (e.g. it has no tokenizer).
var ErrRun = errclass.New(errclass.Invalid, "session: cannot run")

// ErrNotUTF8: a text to tokenize is not valid UTF-8 (a usage error: the
// tokenizer would silently replace the bad bytes).
var ErrNotUTF8 = errclass.New(errclass.Usage, "session: text is not valid UTF-8")

// Session is a pack loaded to run: the proven pack (every rule and digest
// checked by the overlay loader), the bound model, the Engine that runs it
// on the chosen backend, and the pack's tokenizer and generation config
// when it carries them.
type Session struct {
	Pack      *dgq.Pack
	Model     *model.Model
	Engine    *model.Engine
	Tokenizer *tokenizer.Tokenizer // nil when the pack has no tokenizer.json
	GenConfig *generate.Config
	// UploadSeconds is how long putting the weights on the backend took
	// (the Engine's upload, synchronized).
	UploadSeconds float64
	// TokenizerConfig is the pack's tokenizer_config.json (the chat
	// format), nil when it has none.
	TokenizerConfig []byte
	// Memory is the memory estimate Load checked (Options.Workload); nil
	// without a workload.
	Memory  *MemoryEstimate
	backend backend.Backend
}

// Options configures Load.
type Options struct {
	Workers     int  // host goroutines of the cpu backend; 0 = all cores
	SkipDigests bool // trust the pack's digests instead of verifying them at load
	// Backend names the compute backend (backend.Open): "" is "cpu".
	Backend string
	// Precision is the backend's arithmetic (backend.Config; "" = f32).
	Precision string
	// Profile wraps the backend in a backend.Profiled (dgq bench --profile).
	Profile bool
	// Wrap, when not nil, wraps the opened backend before any weight is
	// uploaded (after Profile's wrapper): the Engine runs on what it returns,
	// and Close closes that (dgq calibrate records the ops' inputs so).
	Wrap func(backend.Backend) backend.Backend
	// Note, when not nil, receives a one-line note for the user once the
	// model is bound, before any of it runs: on the cpu backend, for a model
	// whose denoising step costs at least CPUNoteMACs, CPUNote's estimate of
	// a step and the advice to use a GPU backend.
	Note func(string)
	// Workload, when not nil, is what the caller will run on the session:
	// Load estimates the memory it needs (Spec.Estimate) once the backend
	// is open and, before reading any weight, refuses with ErrMemory when
	// the estimate exceeds MaxMemory or, without it, what the backend has.
	Workload *Workload
	// MaxMemory (--max-memory) replaces what the backend has as the limit
	// of the estimate; 0: what the backend has.
	MaxMemory limits.Bytes
}

// Validate refuses options out of range before anything is opened:
// Workers below 0 or above limits.WorkerCap, a negative MaxMemory.
func (o Options) Validate() error {
	return limits.First(nil,
		limits.Workers("--workers", o.Workers),
		limits.NonNegative("--max-memory", int64(o.MaxMemory), "leave it out to use what the backend has"))
}

// CPUNoteMACs is the cost of a denoising step (Model.StepMACs over the
// config's canvas) from which Load notes, on the cpu backend, what a step
// costs: the released 26B model's step is about 1.1·10¹² multiply-adds,
// minutes on a few cores; a one-layer model of the same width is 0.4·10¹².
const CPUNoteMACs = 1e12

// CPUNote says what one denoising step of the model c describes costs on
// the cpu backend with workers goroutines: the multiply-adds over its canvas
// (model.StepMACs) and, at the rate cpu.MACRate measures here (tens of
// milliseconds, only then), about how long that takes at best, and that a
// GPU backend is how to chat with such a model. It is "" for a model whose
// step costs less than CPUNoteMACs.
func CPUNote(c *layout.Config, workers int) string {
	return cpuNote(c, func() float64 { return cpu.MACRate(workers) })
}

// cpuNote is CPUNote with the rate measured by rate.
func cpuNote(c *layout.Config, rate func() float64) string {
	macs := model.StepMACs(c, c.CanvasLength)
	if macs < CPUNoteMACs {
		return ""
	}
	r := rate()
	return fmt.Sprintf("on the cpu backend one denoising step of this %d-layer model over %d positions is %.2g·10¹² multiply-adds: at least %s at the %.2g·10⁹ multiply-adds/s measured here, and a reply takes up to %d steps per block; the cpu backend is the reference, not a way to chat: use --backend cuda or --backend metal",
		len(c.Text.Layers), c.CanvasLength, macs/1e12, roughDuration(macs/r), r/1e9, generate.DefaultConfig().MaxDenoisingSteps)
}

// roughDuration writes seconds as a short approximate duration.
func roughDuration(s float64) string {
	switch {
	case s < 90:
		return fmt.Sprintf("%.0f s", s)
	case s < 90*60:
		return fmt.Sprintf("%.0f min", s/60)
	default:
		return fmt.Sprintf("%.1f h", s/3600)
	}
}

// Load opens any pack (self-contained or layered) through the overlay
// loader, binds the text model and uploads it to the backend o names.
// Verifying the digests (the long part of loading) stops when ctx is done;
// the error then wraps ctx.Err() and nothing stays open.
func Load(ctx context.Context, dir string, o Options) (*Session, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	dir, err := dgq.ResolvePack(dir)
	if err != nil {
		return nil, err
	}
	// Open the backend first: a machine without the device fails at once.
	be, err := backend.Open(cmp.Or(o.Backend, "cpu"), backend.Config{Precision: o.Precision, Workers: o.Workers})
	if err != nil {
		return nil, err
	}
	var memory *MemoryEstimate
	if o.Workload != nil { // before any weight is read
		spec, err := ReadSpec(dir)
		if err != nil {
			be.Close()
			return nil, err
		}
		est := spec.Estimate(*o.Workload, be.Name())
		est.available(be)
		if err := est.check(int64(o.MaxMemory)); err != nil {
			be.Close()
			return nil, err
		}
		memory = &est
	}
	if o.Profile {
		be = backend.NewProfiled(be)
	}
	if o.Wrap != nil {
		be = o.Wrap(be)
	}
	p, err := overlay.OpenContext(ctx, dir, overlay.Options{SkipDigests: o.SkipDigests})
	if err != nil {
		be.Close()
		return nil, err
	}
	s := &Session{Pack: p, backend: be, Memory: memory}
	fail := func(err error) (*Session, error) {
		s.Close()
		return nil, err
	}
	w := model.PackWeights(p)
	if s.Model, err = model.Bind(w); err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if o.Note != nil && be.Name() == "cpu" {
		if n := CPUNote(s.Model.Config(), o.Workers); n != "" {
			o.Note(n)
		}
	}
	t0 := time.Now()
	if s.Engine, err = model.NewEngine(s.Model, be); err != nil {
		return fail(err)
	}
	if err := be.Sync(); err != nil {
		return fail(err)
	}
	s.UploadSeconds = time.Since(t0).Seconds()
	s.GenConfig = generate.DefaultConfig()
	if data, err := w.ReadFile("generation_config.json"); err == nil {
		if s.GenConfig, err = generate.ParseConfig(data); err != nil {
			return fail(fmt.Errorf("%s: %w", dir, err))
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fail(err)
	}
	if data, err := w.ReadFile("tokenizer.json"); err == nil {
		if s.Tokenizer, err = tokenizer.Load(data); err != nil {
			return fail(fmt.Errorf("%s: %w", dir, err))
		}
		s.TokenizerConfig, _ = w.ReadFile("tokenizer_config.json")
	}
	return s, nil
}

// Close releases the engine, its backend and the pack.
func (s *Session) Close() error {
	var errs []error
	if s.Engine != nil {
		errs = append(errs, s.Engine.Close())
		s.Engine = nil
	}
	if s.backend != nil {
		errs = append(errs, s.backend.Close())
		s.backend = nil
	}
	errs = append(errs, s.Pack.Close())
	return errors.Join(errs...)
}

// Generate runs generate.Generate on the session's engine with the pack's
// generation config.
func (s *Session) Generate(ctx context.Context, prompt []int, o generate.Options) (*generate.Generation, error) {
	return generate.Generate(ctx, s.Engine, prompt, s.GenConfig, o)
}

// RunOptions configures Run.
type RunOptions struct {
	Prompt string
	// Raw feeds the prompt as plain text (bos + text) instead of one user turn
	// of the chat format.
	Raw bool
	// Generation holds the seed, lengths, divergence switches and trace
	// (its OnBlock, when set, is called before Stream's chunk of the block).
	Generation generate.Options
	// Stream, when not nil, receives the reply as it is made: one chunk
	// after every committed block, and a last one when the run is
	// interrupted. The chunks' texts concatenate to RunResult.Reply.
	Stream func(ReplyChunk)
}

// RunResult is one reply.
type RunResult struct {
	Reply      string // the new tokens up to the first end-of-turn/EOS, decoded without special tokens
	PromptIDs  []int
	Tokens     []int // every new token (committed blocks in full)
	Generation *generate.Generation
	Elapsed    time.Duration
	// ReplyTokens is how many tokens the reply has: Tokens up to the first
	// stop id.
	ReplyTokens int
	// Interrupted is true when ctx ended the run: Reply, Tokens and
	// Generation hold the blocks committed before it.
	Interrupted bool
}

// Run formats the prompt, generates, and decodes the reply. When ctx ends
// the generation, Run returns the reply of the blocks committed so far
// (RunResult.Interrupted) together with an error wrapping ctx.Err().
func (s *Session) Run(ctx context.Context, o RunOptions) (*RunResult, error) {
	if s.Tokenizer == nil {
		return nil, fmt.Errorf("%w: %s carries no tokenizer.json; run needs one", ErrRun, s.Pack.Dir)
	}
	ids := s.Tokenizer.Encode(o.Prompt, true)
	if !o.Raw {
		var err error
		if ids, err = s.Tokenizer.Chat(o.Prompt, s.TokenizerConfig); err != nil {
			return nil, err
		}
	}
	if err := o.checkPrompt(&Spec{Config: s.Model.Config(), GenConfig: s.GenConfig}, len(ids)); err != nil {
		return nil, err
	}
	start := time.Now()
	st := &replyStream{s: s}
	gen := o.Generation
	if o.Stream != nil {
		onBlock := gen.OnBlock
		gen.OnBlock = func(b generate.BlockCommit) {
			if onBlock != nil {
				onBlock(b)
			}
			o.Stream(ReplyChunk{Block: b.Block, Text: st.add(b.Tokens, b.Last), Tokens: len(st.tokens), Steps: b.TotalSteps, Last: b.Last, Elapsed: b.Elapsed})
		}
	}
	g, err := s.Generate(ctx, ids, gen)
	if err != nil && (g == nil || g.StopReason != generate.StopCanceled) {
		return nil, err
	}
	r := &RunResult{PromptIDs: ids, Tokens: g.Tokens, Generation: g, Elapsed: time.Since(start), Interrupted: err != nil}
	reply := s.ReplyTokens(g.Tokens)
	r.Reply, r.ReplyTokens = s.Tokenizer.Decode(reply, true), len(reply)
	if r.Interrupted && o.Stream != nil {
		o.Stream(ReplyChunk{Block: g.Blocks, Text: st.add(nil, true), Tokens: len(st.tokens), Steps: g.Steps, Last: true, Elapsed: r.Elapsed})
	}
	return r, err
}

// ReplyTokens cuts the new tokens at the first stop id (EOS, end of turn).
func (s *Session) ReplyTokens(tokens []int) []int {
	for i, t := range tokens {
		for _, e := range s.GenConfig.EOSTokenIDs {
			if t == e {
				return tokens[:i]
			}
		}
	}
	return tokens
}

// Reply loads the pack at dir, generates a reply to one prompt and closes
// it. When ctx ends the generation, the reply so far comes back with the
// error (Run).
func Reply(ctx context.Context, dir string, lo Options, o RunOptions) (*RunResult, error) {
	if err := lo.Validate(); err != nil {
		return nil, err
	}
	spec, err := ReadSpec(dir)
	if err != nil {
		return nil, err
	}
	if lo.Workload, err = o.check(spec); err != nil {
		return nil, err
	}
	s, err := Load(ctx, dir, lo)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.Run(ctx, o)
}

// Tokenize encodes text (with the special tokens the tokenizer adds, e.g.
// bos) with the tokenizer.json at path, or the one in the pack or snapshot
// directory at path; it returns the ids and their token strings. A text
// that is not valid UTF-8 is refused (ErrNotUTF8), naming the first bad
// byte's offset.
func Tokenize(path, text string) ([]int, []string, error) {
	if !utf8.ValidString(text) {
		return nil, nil, fmt.Errorf("%w: the byte at offset %d starts no UTF-8 character", ErrNotUTF8, firstInvalid(text))
	}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		if _, ok := hfcache.ParseRepoRef(path); ok { // a pack or a checkpoint in the hub cache
			res, err := hfcache.ResolveSource(path)
			if err != nil {
				return nil, nil, err
			}
			path = res.Dir
		}
	}
	t, err := tokenizer.LoadFile(path)
	if err != nil {
		return nil, nil, err
	}
	ids := t.Encode(text, true)
	toks := make([]string, len(ids))
	for i, id := range ids {
		toks[i], _ = t.Token(id)
	}
	return ids, toks, nil
}

// firstInvalid is the offset of the first byte of s that starts no valid
// UTF-8 encoding (len(s) when there is none).
func firstInvalid(s string) int {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return i
			}
		}
	}
	return len(s)
}
