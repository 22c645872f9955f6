package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/overlay"
	"github.com/dgq-dev/dgq/runtime/tokenizer"
)

// ErrRun: the pack cannot serve the request (e.g. it has no tokenizer).
var ErrRun = errors.New("runtime: cannot run")

// Session is a pack loaded to run: the proven pack (every rule and digest
// checked by the overlay loader), the bound model, and the pack's tokenizer
// and generation config when it carries them.
type Session struct {
	Pack      *dgq.Pack
	Model     *Model
	Tokenizer *tokenizer.Tokenizer // nil when the pack has no tokenizer.json
	GenConfig *GenerationConfig
	tokCfg    []byte // tokenizer_config.json, for the chat format
}

// LoadOptions configures Load.
type LoadOptions struct {
	Workers     int  // forward-pass goroutines; 0 = all cores
	SkipDigests bool // trust the pack's digests instead of verifying them at load
}

// Load opens any pack (self-contained or layered) through the overlay
// loader and binds the text model.
func Load(dir string, o LoadOptions) (*Session, error) {
	p, err := overlay.OpenWith(dir, overlay.Options{SkipDigests: o.SkipDigests})
	if err != nil {
		return nil, err
	}
	s := &Session{Pack: p}
	fail := func(err error) (*Session, error) {
		p.Close()
		return nil, err
	}
	w := PackWeights(p)
	if s.Model, err = BindWithOptions(w, Options{Workers: o.Workers}); err != nil {
		return fail(err)
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

// Close releases the pack.
func (s *Session) Close() error { return s.Pack.Close() }

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
	g, err := s.Model.Generate(ctx, ids, s.GenConfig, o.Generation)
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
	r, err := Parity(s.Model, reference, b)
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
