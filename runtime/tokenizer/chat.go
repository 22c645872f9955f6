package tokenizer

import (
	"encoding/json"
	"errors"
	"strings"
	"unicode"
)

// Gemma's turn markers.
const (
	StartOfTurn = "<start_of_turn>"
	EndOfTurn   = "<end_of_turn>"
)

// ChatFormat is the rendering of a single user message that Chat uses,
// read from a tokenizer_config.json.
type ChatFormat struct {
	BOS       string // prepended text ("" when the template has no bos_token)
	UserRole  string // "user"
	ModelRole string // the generation prompt's role, "model" for Gemma
	Trim      bool   // the template trims message content
}

// Render returns the prompt text for one user message:
// bos + "<start_of_turn>user\n" + message + "<end_of_turn>\n<start_of_turn>model\n".
func (f ChatFormat) Render(message string) string {
	if f.Trim {
		message = pyStrip(message)
	}
	var b strings.Builder
	b.WriteString(f.BOS)
	b.WriteString(StartOfTurn + f.UserRole + "\n")
	b.WriteString(message)
	b.WriteString(EndOfTurn + "\n")
	b.WriteString(StartOfTurn + f.ModelRole + "\n")
	return b.String()
}

// DefaultChatFormat is Gemma's format: <bos>, roles "user" and "model",
// trimmed content.
var DefaultChatFormat = ChatFormat{BOS: "<bos>", UserRole: "user", ModelRole: "model", Trim: true}

type chatConfigJSON struct {
	BOSToken     json.RawMessage `json:"bos_token"`
	ChatTemplate json.RawMessage `json:"chat_template"`
}

// ParseChatFormat reads the chat conventions of a tokenizer_config.json.
// nil or empty input gives DefaultChatFormat. The template must be a Gemma
// turn template (it must use <start_of_turn> and <end_of_turn>); from it come
// whether bos_token is emitted, whether content is trimmed, and the role
// named by the generation prompt ("<start_of_turn>model\n").
func ParseChatFormat(tokenizerConfigJSON []byte) (ChatFormat, error) {
	f := DefaultChatFormat
	if len(strings.TrimSpace(string(tokenizerConfigJSON))) == 0 {
		return f, nil
	}
	var c chatConfigJSON
	if err := json.Unmarshal(tokenizerConfigJSON, &c); err != nil {
		return f, formatErr("tokenizer_config: %v", err)
	}
	if !isNull(c.BOSToken) {
		bos, err := tokenContent(c.BOSToken)
		if err != nil {
			return f, formatErr("tokenizer_config: bos_token: %v", err)
		}
		f.BOS = bos
	}
	tmpl, err := chatTemplate(c.ChatTemplate)
	if err != nil {
		return f, err
	}
	if tmpl == "" {
		return f, nil
	}
	if !strings.Contains(tmpl, StartOfTurn) || !strings.Contains(tmpl, EndOfTurn) {
		return f, unsupportedErr("tokenizer_config: chat_template does not use Gemma's %s/%s turns", StartOfTurn, EndOfTurn)
	}
	if !strings.Contains(tmpl, "bos_token") && (f.BOS == "" || !strings.Contains(tmpl, f.BOS)) {
		f.BOS = ""
	}
	f.Trim = strings.Contains(strings.ReplaceAll(tmpl, " ", ""), "|trim")
	if role := generationRole(tmpl); role != "" {
		f.ModelRole = role
	}
	return f, nil
}

// tokenContent reads a token given as a string or as {"content": ...}.
func tokenContent(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var o struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &o); err != nil || o.Content == nil {
		return "", errNotToken
	}
	return *o.Content, nil
}

var errNotToken = errors.New(`neither a string nor {"content": ...}`)

// chatTemplate reads chat_template: a string, or a list of {name, template}
// from which "default" (else the first) is taken.
func chatTemplate(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var list []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", formatErr("tokenizer_config: chat_template: %v", err)
	}
	for _, t := range list {
		if t.Name == "default" {
			return t.Template, nil
		}
	}
	if len(list) > 0 {
		return list[0].Template, nil
	}
	return "", nil
}

// generationRole finds the role of the turn the generation prompt opens:
// the name after the first <start_of_turn> that follows
// "add_generation_prompt", ended by a newline (or a "\n" escape inside a
// template string literal).
func generationRole(tmpl string) string {
	i := strings.LastIndex(tmpl, "add_generation_prompt")
	if i < 0 {
		return ""
	}
	rest := tmpl[i:]
	j := strings.Index(rest, StartOfTurn)
	if j < 0 {
		return ""
	}
	rest = rest[j+len(StartOfTurn):]
	k := 0
	for k < len(rest) {
		c := rest[k]
		if c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			k++
			continue
		}
		break
	}
	if k == 0 {
		return ""
	}
	if tail := rest[k:]; !strings.HasPrefix(tail, "\n") && !strings.HasPrefix(tail, `\n`) {
		return ""
	}
	return rest[:k]
}

// pyStrip removes leading and trailing whitespace as Python's str.strip()
// (Jinja's trim filter) does: Unicode White_Space plus the separators
// U+001C..U+001F.
func pyStrip(s string) string {
	return strings.TrimFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f
	})
}

// Chat formats one user message as Gemma's turn format, following the
// chat_template conventions of tokenizerConfigJSON (see ParseChatFormat; nil
// means Gemma's defaults), and returns its ids: bos,
// "<start_of_turn>user\n" + message + "<end_of_turn>\n<start_of_turn>model\n".
// As with transformers' apply_chat_template, the rendered text is encoded
// without the post-processor, so the bos comes from the template, and
// special-token text inside the message is read as those tokens.
func (t *Tokenizer) Chat(message string, tokenizerConfigJSON []byte) ([]int, error) {
	f, err := ParseChatFormat(tokenizerConfigJSON)
	if err != nil {
		return nil, err
	}
	for _, tok := range []string{StartOfTurn, EndOfTurn, f.BOS} {
		if tok == "" {
			continue
		}
		if _, ok := t.addedByContent[tok]; !ok {
			return nil, formatErr("chat: %q is not an added token of this tokenizer", tok)
		}
	}
	return t.Encode(f.Render(message), false), nil
}
