package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/dgq/errclass"
	"github.com/dgq-dev/dgq/overlay"
	"github.com/dgq-dev/dgq/runtime/tokenizer"
)

// ErrRun: the pack cannot serve the request (e.g. it has no tokenizer).
var ErrRun = errclass.New(errclass.Invalid, "runtime: cannot run")

// Session is a pack loaded to run: the proven pack (every rule and digest
// checked by the overlay loader), the bound model, and the pack's tokenizer
// and generation config when it carries them.
type Session struct {
	Pack  *dgq.Pack
	Model *Model
	// Engine runs the model on the backend LoadOptions named (nil for
	// "cpu": Model itself runs).
	Engine    *Engine
	Tokenizer *tokenizer.Tokenizer // nil when the pack has no tokenizer.json
	GenConfig *GenerationConfig
	// UploadSeconds is how long putting the weights on the backend took
	// (the Engine's upload, synchronized); 0 without an Engine.
	UploadSeconds float64
	tokCfg        []byte // tokenizer_config.json, for the chat format
	backend       Backend
}

// LoadOptions configures Load.
type LoadOptions struct {
	Workers     int  // forward-pass goroutines; 0 = all cores
	SkipDigests bool // trust the pack's digests instead of verifying them at load
	// Backend names the compute backend (OpenBackend): "" or "cpu" runs
	// Model on the host; another opens it and uploads the weights.
	Backend string
	// Precision is the backend's BackendConfig.Precision ("" = f32).
	Precision string
	profile   bool // wrap the backend in a ProfiledBackend (Bench)
}

// Load opens any pack (self-contained or layered) through the overlay
// loader and binds the text model.
func Load(dir string, o LoadOptions) (*Session, error) {
	var be Backend
	if o.Backend != "" && o.Backend != "cpu" || o.Precision != "" && o.Precision != "f32" {
		// Open the device first: a machine without one fails at once.
		var err error
		if be, err = OpenBackend(cmp.Or(o.Backend, "cpu"), BackendConfig{Precision: o.Precision}); err != nil {
			return nil, err
		}
		if o.profile {
			be = NewProfiledBackend(be)
		}
	}
	p, err := overlay.OpenWith(dir, overlay.Options{SkipDigests: o.SkipDigests})
	if err != nil {
		if be != nil {
			be.Close()
		}
		return nil, err
	}
	s := &Session{Pack: p, backend: be}
	fail := func(err error) (*Session, error) {
		s.Close()
		return nil, err
	}
	w := PackWeights(p)
	if s.Model, err = BindWithOptions(w, Options{Workers: o.Workers}); err != nil {
		return fail(err)
	}
	if be != nil {
		t0 := time.Now()
		if s.Engine, err = NewEngine(s.Model, be); err != nil {
			return fail(err)
		}
		if err := be.Sync(); err != nil {
			return fail(err)
		}
		s.UploadSeconds = time.Since(t0).Seconds()
	}
	s.GenConfig = DefaultGenerationConfig()
	if data, err := w.ReadFile("generation_config.json"); err == nil {
		if s.GenConfig, err = ParseGenerationConfig(data); err != nil {
			return fail(fmt.Errorf("%s: %w", dir, err))
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fail(err)
	}
	if data, err := w.ReadFile("tokenizer.json"); err == nil {
		if s.Tokenizer, err = tokenizer.Load(data); err != nil {
			return fail(fmt.Errorf("%s: %w", dir, err))
		}
		s.tokCfg, _ = w.ReadFile("tokenizer_config.json")
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

// Generate runs Generate on the session's engine, or on Model when the
// backend is the CPU.
func (s *Session) Generate(ctx context.Context, prompt []int, o GenerateOptions) (*Generation, error) {
	if s.Engine != nil {
		return s.Engine.Generate(ctx, prompt, s.GenConfig, o)
	}
	return s.Model.Generate(ctx, prompt, s.GenConfig, o)
}

// RunOptions configures Run.
type RunOptions struct {
	Prompt string
	// Raw feeds the prompt as plain text (bos + text) instead of one user turn
	// of the chat format.
	Raw bool
	// Generation holds the seed, lengths, divergence switches and trace.
	Generation GenerateOptions
}

// RunResult is one reply.
type RunResult struct {
	Reply      string // the new tokens up to the first end-of-turn/EOS, decoded without special tokens
	PromptIDs  []int
	Tokens     []int // every new token (committed blocks in full)
	Generation *Generation
	Elapsed    time.Duration
}

// Run formats the prompt, generates, and decodes the reply.
func (s *Session) Run(ctx context.Context, o RunOptions) (*RunResult, error) {
	if s.Tokenizer == nil {
		return nil, fmt.Errorf("%w: %s carries no tokenizer.json; run needs one", ErrRun, s.Pack.Dir)
	}
	ids := s.Tokenizer.Encode(o.Prompt, true)
	if !o.Raw {
		var err error
		if ids, err = s.Tokenizer.Chat(o.Prompt, s.tokCfg); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	g, err := s.Generate(ctx, ids, o.Generation)
	if err != nil {
		return nil, err
	}
	r := &RunResult{PromptIDs: ids, Tokens: g.Tokens, Generation: g, Elapsed: time.Since(start)}
	r.Reply = s.Tokenizer.Decode(s.replyTokens(g.Tokens), true)
	return r, nil
}

// replyTokens cuts the new tokens at the first stop id (EOS, end of turn).
func (s *Session) replyTokens(tokens []int) []int {
	for i, t := range tokens {
		for _, e := range s.GenConfig.EOSTokenIDs {
			if t == e {
				return tokens[:i]
			}
		}
	}
	return tokens
}

// ParityRun loads the pack at dir and runs Parity against the reference with
// the documented bounds of the pack's weight format (DefaultBounds).
func ParityRun(dir, reference string, o LoadOptions) (*ParityReport, Bounds, error) {
	s, err := Load(dir, o)
	if err != nil {
		return nil, Bounds{}, err
	}
	defer s.Close()
	b := DefaultBounds(s.Model.WeightFormat())
	if s.Engine == nil {
		r, err := Parity(s.Model, reference, b)
		return r, b, err
	}
	if o.Precision == "bf16" {
		b.VsCPU = VsCPUBF16
	}
	r, err := s.Engine.Parity(reference, b)
	return r, b, err
}

// Reply loads the pack at dir, generates a reply to one prompt and closes it.
func Reply(ctx context.Context, dir string, lo LoadOptions, o RunOptions) (*RunResult, error) {
	s, err := Load(dir, lo)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.Run(ctx, o)
}

// Tokenize encodes text (with the special tokens the tokenizer adds, e.g.
// bos) with the tokenizer.json at path, or the one in the pack or snapshot
// directory at path; it returns the ids and their token strings.
func Tokenize(path, text string) ([]int, []string, error) {
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
