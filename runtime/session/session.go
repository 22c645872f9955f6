package session

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/dgq/errclass"
	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/overlay"
	"github.com/dgq-dev/dgq/runtime/backend"
	_ "github.com/dgq-dev/dgq/runtime/cpu" // registers the "cpu" backend
	"github.com/dgq-dev/dgq/runtime/generate"
	"github.com/dgq-dev/dgq/runtime/model"
	"github.com/dgq-dev/dgq/runtime/tokenizer"
)

// ErrRun: the pack cannot serve the request (e.g. it has no tokenizer).
var ErrRun = errclass.New(errclass.Invalid, "session: cannot run")

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
	backend         backend.Backend
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
}

// Load opens any pack (self-contained or layered) through the overlay
// loader, binds the text model and uploads it to the backend o names.
func Load(dir string, o Options) (*Session, error) {
	dir, err := dgq.ResolvePack(dir)
	if err != nil {
		return nil, err
	}
	// Open the backend first: a machine without the device fails at once.
	be, err := backend.Open(cmp.Or(o.Backend, "cpu"), backend.Config{Precision: o.Precision, Workers: o.Workers})
	if err != nil {
		return nil, err
	}
	if o.Profile {
		be = backend.NewProfiled(be)
	}
	p, err := overlay.OpenWith(dir, overlay.Options{SkipDigests: o.SkipDigests})
	if err != nil {
		be.Close()
		return nil, err
	}
	s := &Session{Pack: p, backend: be}
	fail := func(err error) (*Session, error) {
		s.Close()
		return nil, err
	}
	w := model.PackWeights(p)
	if s.Model, err = model.Bind(w); err != nil {
		return fail(err)
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
	// Generation holds the seed, lengths, divergence switches and trace.
	Generation generate.Options
}

// RunResult is one reply.
type RunResult struct {
	Reply      string // the new tokens up to the first end-of-turn/EOS, decoded without special tokens
	PromptIDs  []int
	Tokens     []int // every new token (committed blocks in full)
	Generation *generate.Generation
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
		if ids, err = s.Tokenizer.Chat(o.Prompt, s.TokenizerConfig); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	g, err := s.Generate(ctx, ids, o.Generation)
	if err != nil {
		return nil, err
	}
	r := &RunResult{PromptIDs: ids, Tokens: g.Tokens, Generation: g, Elapsed: time.Since(start)}
	r.Reply = s.Tokenizer.Decode(s.ReplyTokens(g.Tokens), true)
	return r, nil
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

// Reply loads the pack at dir, generates a reply to one prompt and closes it.
func Reply(ctx context.Context, dir string, lo Options, o RunOptions) (*RunResult, error) {
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
