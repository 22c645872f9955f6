package session

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/dgq/testmodel"
	"github.com/dgq-dev/dgq/layout"
	"github.com/dgq-dev/dgq/runtime/generate"
	"github.com/dgq-dev/dgq/runtime/tokenizer"
)

// The reply streams block by block: the chunks concatenate to the reply,
// the reply is the one a run without Stream gives at the same seed, and an
// interrupted run returns the blocks committed before it with an error
// wrapping context.Canceled, its last chunk flushing what was held back.
func TestRunStreams(t *testing.T) {
	pack := tinyPack(t)
	s, err := Load(t.Context(), pack, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o := RunOptions{Prompt: "Tell me about the sea", Generation: generate.Options{MaxNewTokens: 64}}
	var plain *RunResult
	for seed := range uint64(10) { // a seed whose reply takes several blocks
		o.Generation.Seed = seed
		if plain, err = s.Run(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		if plain.Generation.Blocks >= 2 {
			break
		}
	}
	if plain.Generation.Blocks < 2 {
		t.Fatalf("no seed of 10 gives two blocks")
	}
	var chunks []ReplyChunk
	o.Stream = func(c ReplyChunk) { chunks = append(chunks, c) }
	streamed, err := s.Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for i, c := range chunks {
		text.WriteString(c.Text)
		if c.Block != i || c.Last != (i == len(chunks)-1) || c.Tokens != (i+1)*16 {
			t.Errorf("chunk %d: %+v", i, c)
		}
	}
	if streamed.Reply != plain.Reply || text.String() != plain.Reply || len(chunks) != plain.Generation.Blocks || streamed.Interrupted {
		t.Fatalf("streamed %q in %d chunks (%q), plain %q in %d blocks", streamed.Reply, len(chunks), text.String(), plain.Reply, plain.Generation.Blocks)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	chunks, text = nil, strings.Builder{}
	o.Stream = func(c ReplyChunk) {
		chunks = append(chunks, c)
		text.WriteString(c.Text)
		cancel() // after the first block
	}
	part, err := s.Run(ctx, o)
	if !errors.Is(err, context.Canceled) || part == nil || !part.Interrupted {
		t.Fatalf("interrupted: %+v, %v", part, err)
	}
	if part.Generation.Blocks != 1 || len(part.Tokens) != 16 || len(chunks) != 2 || !chunks[1].Last || chunks[1].Block != 1 {
		t.Errorf("interrupted after the first block: %d blocks, %d tokens, chunks %+v", part.Generation.Blocks, len(part.Tokens), chunks)
	}
	if text.String() != part.Reply || !strings.HasPrefix(plain.Reply, strings.TrimRight(part.Reply, "\uFFFD")) {
		t.Errorf("interrupted reply %q (streamed %q), whole reply %q", part.Reply, text.String(), plain.Reply)
	}
}

// replyStream gives each block's new text, holding back a trailing run of
// byte tokens that are not yet a whole UTF-8 character until the next
// block completes it (or the reply ends), and stops at the first EOS. The
// tokenizer is the tiny checkpoint's with its byte tokens made ordinary, as
// Gemma's are (the tiny one marks them special, so a reply drops them).
func TestReplyStreamSplitsNoCharacter(t *testing.T) {
	b, err := testmodel.ReadFile("tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	var tj map[string]any
	if err := json.Unmarshal(b, &tj); err != nil {
		t.Fatal(err)
	}
	for _, a := range tj["added_tokens"].([]any) {
		if at := a.(map[string]any); strings.HasPrefix(at["content"].(string), "<0x") {
			at["special"] = false
		}
	}
	if b, err = json.Marshal(tj); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	s := &Session{Tokenizer: tok, GenConfig: generate.DefaultConfig()}
	a := tok.Encode("a", false)
	if len(a) != 1 {
		t.Fatalf("\"a\" is %v", a)
	}
	const e2, x82, xac, eos = 232, 136, 178, 1 // "€" is E2 82 AC
	for _, tc := range []struct {
		name   string
		blocks [][]int
		want   []string
	}{
		{"split euro", [][]int{{a[0], e2, x82}, {xac, a[0]}}, []string{"a", "€a"}},
		{"split after one byte", [][]int{{e2}, {x82, xac}}, []string{"", "€"}},
		{"never completed", [][]int{{a[0], e2}, {a[0]}}, []string{"a", "\uFFFDa"}},
		{"incomplete at the end", [][]int{{a[0]}, {e2, x82}}, []string{"a", "\uFFFD\uFFFD"}},
		{"whole in a block", [][]int{{e2, x82, xac}, {a[0]}}, []string{"€", "a"}},
		{"eos", [][]int{{a[0], eos, a[0]}}, []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &replyStream{s: s}
			var all []int
			for i, blk := range tc.blocks {
				all = append(all, blk...)
				if got := r.add(blk, i == len(tc.blocks)-1); got != tc.want[i] {
					t.Errorf("block %d: %q, want %q", i, got, tc.want[i])
				}
			}
			if whole := tok.Decode(s.ReplyTokens(all), true); r.shown != whole {
				t.Errorf("shown %q, the whole reply %q", r.shown, whole)
			}
		})
	}
}

// The note about the cpu backend comes for a model whose step costs at
// least CPUNoteMACs (the released 30-layer shapes), with the cost, the
// measured rate's time and the GPU backends; not for smaller ones.
func TestCPUNote(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config []byte
		want   []string // "" : no note
	}{
		{"real 30 layers", dgq.SynthConfig(30), []string{"30-layer model over 256 positions", "1.2·10¹² multiply-adds", "at least 10 min", "2·10⁹ multiply-adds/s", "up to 48 steps", "--backend cuda or --backend metal"}},
		{"real 1 layer", dgq.SynthConfig(1), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := layout.ParseConfig(tc.config)
			if err != nil {
				t.Fatal(err)
			}
			measured := false
			got := cpuNote(c, func() float64 { measured = true; return 4.5e9 / 2.25 })
			if tc.want == nil {
				if got != "" || measured {
					t.Errorf("note %q (rate measured: %v), want none", got, measured)
				}
				return
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) || strings.Contains(got, "\n") {
					t.Errorf("note %q lacks %q", got, w)
				}
			}
		})
	}
}
