package tokenizer

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestChatGemma3(t *testing.T) {
	tok := gemma3Tokenizer(t)
	ids, err := tok.Chat("  What is the meaning of 67?\n\t", gemma3Config(t))
	if err != nil {
		t.Fatal(err)
	}
	// <bos> + the reference ids of
	// "<start_of_turn>user\nWhat is the meaning of 67?<end_of_turn>\n<start_of_turn>model\n".
	want := []int{2, 105, 2364, 107, 3689, 563, 506, 6590, 529, 236743, 236825, 236832, 236881, 106, 107, 105, 4368, 107}
	if !slices.Equal(ids, want) {
		t.Fatalf("Chat ids\n got %v\nwant %v", ids, want)
	}
	if got, want := tok.Decode(ids, false), "<bos><start_of_turn>user\nWhat is the meaning of 67?<end_of_turn>\n<start_of_turn>model\n"; got != want {
		t.Errorf("decoded %q", got)
	}
	// Without a config: the same Gemma defaults.
	ids2, err := tok.Chat("  What is the meaning of 67?\n\t", nil)
	if err != nil || !slices.Equal(ids2, want) {
		t.Errorf("Chat without config: %v, %v", ids2, err)
	}
}

func TestChatTiny(t *testing.T) {
	tok := tinyTokenizer(t)
	ids, err := tok.Chat("Hello world", tinyConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	text := "<bos><start_of_turn>user\nHello world<end_of_turn>\n<start_of_turn>model\n"
	if want := tok.Encode(text, false); !slices.Equal(ids, want) {
		t.Errorf("Chat ids %v, want %v", ids, want)
	}
	if ids[0] != 2 || ids[1] != 4 {
		t.Errorf("Chat ids start %v, want <bos> <start_of_turn>", ids[:2])
	}
	if got := tok.Decode(ids, false); got != text {
		t.Errorf("decoded %q", got)
	}
}

func TestParseChatFormat(t *testing.T) {
	cfg := func(m map[string]any) []byte {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	g, err := ParseChatFormat(gemma3Config(t))
	if err != nil || g != DefaultChatFormat {
		t.Errorf("gemma3 config: %+v, %v", g, err)
	}
	f, err := ParseChatFormat(tinyConfig(t))
	if err != nil || f != DefaultChatFormat {
		t.Errorf("tiny config: %+v, %v", f, err)
	}
	// Another role name for the model turn, no trim, bos as an object.
	f, err = ParseChatFormat(cfg(map[string]any{
		"bos_token": map[string]any{"content": "<bos>"},
		"chat_template": "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}<end_of_turn>\n" +
			"{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>assistant\\n' }}{% endif %}",
	}))
	want := ChatFormat{BOS: "<bos>", UserRole: "user", ModelRole: "assistant", Trim: false}
	if err != nil || f != want {
		t.Errorf("assistant template: %+v, %v", f, err)
	}
	if got := f.Render(" hi "); got != "<bos><start_of_turn>user\n hi <end_of_turn>\n<start_of_turn>assistant\n" {
		t.Errorf("Render = %q", got)
	}
	// A template without bos_token emits none; a list of templates picks "default".
	f, err = ParseChatFormat(cfg(map[string]any{"chat_template": []map[string]string{
		{"name": "tool_use", "template": "nothing"},
		{"name": "default", "template": "<start_of_turn>{{ m['content'] | trim }}<end_of_turn>"},
	}}))
	if err != nil || f.BOS != "" || !f.Trim || f.ModelRole != "model" {
		t.Errorf("list template: %+v, %v", f, err)
	}
	// Not a Gemma template.
	_, err = ParseChatFormat(cfg(map[string]any{"chat_template": "{% for m in messages %}<|im_start|>{{ m['role'] }}{% endfor %}"}))
	if !errors.Is(err, ErrUnsupported) {
		t.Errorf("ChatML template: %v", err)
	}
	for _, bad := range []string{"{", `{"chat_template": 5}`, `{"bos_token": 5}`, `[]`} {
		if _, err := ParseChatFormat([]byte(bad)); !errors.Is(err, ErrFormat) {
			t.Errorf("ParseChatFormat(%s) = %v", bad, err)
		}
	}
	if got := pyStrip("\x1c\u3000 x \u00a0\u2028\x1f"); got != "x" {
		t.Errorf("pyStrip = %q", got)
	}
}

func TestChatErrors(t *testing.T) {
	tok := tinyTokenizer(t)
	if _, err := tok.Chat("x", []byte("not json")); !errors.Is(err, ErrFormat) || !strings.HasPrefix(err.Error(), "tokenizer: ") {
		t.Errorf("bad config: %v", err)
	}
	if _, err := tok.Chat("x", []byte(`{"bos_token": "<nope>", "chat_template": "{{ bos_token }}<start_of_turn><end_of_turn>"}`)); !errors.Is(err, ErrFormat) {
		t.Errorf("unknown bos: %v", err)
	}
}

// TestChatReference compares Chat with transformers' apply_chat_template
// (add_generation_prompt=True, tokenized), recorded by
// testdata/extra/chat_reference.py with transformers 5.17 and tokenizers
// 0.23.2.
func TestChatReference(t *testing.T) {
	var ref struct {
		Cases []struct {
			Tokenizer, Message, Text string
			IDs                      []int
		}
	}
	if err := json.Unmarshal(readTestdata(t, "extra/chat-reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	toks := map[string]*Tokenizer{"gemma3": gemma3Tokenizer(t), "tiny": tinyTokenizer(t)}
	configs := map[string][]byte{"gemma3": gemma3Config(t), "tiny": tinyConfig(t)}
	matched := 0
	for _, c := range ref.Cases {
		f, err := ParseChatFormat(configs[c.Tokenizer])
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Render(c.Message); got != c.Text {
			t.Errorf("%s %q: rendered %q, want %q", c.Tokenizer, c.Message, got, c.Text)
			continue
		}
		ids, err := toks[c.Tokenizer].Chat(c.Message, configs[c.Tokenizer])
		if err != nil || !slices.Equal(ids, c.IDs) {
			t.Errorf("%s %q: ids %v, %v; want %v", c.Tokenizer, c.Message, ids, err, c.IDs)
			continue
		}
		matched++
	}
	t.Logf("%d/%d chat cases match", matched, len(ref.Cases))
	if len(ref.Cases) == 0 {
		t.Fatal("no cases")
	}
}
