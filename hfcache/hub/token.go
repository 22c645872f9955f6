package hub

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/dgq-dev/dgq/hfcache"
)

// TokenSourceFile is Token.Source for a token read from the token file.
const TokenSourceFile = "file"

// Token is the Hugging Face access token as huggingface_hub finds it
// (utils/_auth.py get_token; constants.py HF_TOKEN_PATH): the first of
// HF_TOKEN and HUGGING_FACE_HUB_TOKEN that is set (one that is set but
// cleans to nothing falls through to the file), else the token file — each
// with carriage returns and newlines removed and spaces trimmed, empty
// counting as none. Its JSON never holds the token.
type Token struct {
	// Value is the token, "" when there is none. Never printed.
	Value string `json:"-"`
	// Source is where it came from: EnvToken, EnvTokenLegacy or
	// TokenSourceFile; "" when there is none.
	Source string `json:"source,omitempty"`
	// File is the token file huggingface_hub reads (TokenFile), "" when the
	// home folder is unknown; FileSource the variable that chose it, or
	// hfcache.SourceDefault.
	File       string `json:"file,omitempty"`
	FileSource string `json:"file_source,omitempty"`
}

// LookupToken finds the access token (Token). A token file that exists but
// cannot be read is an error naming the file, never its content; the
// returned Token still says which file was looked at.
func LookupToken() (Token, error) {
	var t Token
	t.File, t.FileSource = TokenFile()
	for _, name := range []string{EnvToken, EnvTokenLegacy} {
		if v, ok := os.LookupEnv(name); ok && v != "" {
			if c := cleanToken(v); c != "" {
				t.Value, t.Source = c, name
				return t, nil
			}
			break // huggingface_hub takes the first set variable only
		}
	}
	if t.File == "" {
		return t, nil
	}
	f, err := os.Open(t.File)
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return t, fmt.Errorf("hub: token file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile))
	if err != nil {
		return t, fmt.Errorf("hub: token file %s: %w", t.File, err)
	}
	if c := cleanToken(string(b)); c != "" {
		t.Value, t.Source = c, TokenSourceFile
	}
	return t, nil
}

// TokenFromEnv returns LookupToken's token ("" when there is none).
func TokenFromEnv() (string, error) {
	t, err := LookupToken()
	return t.Value, err
}

// TokenPath returns the token file huggingface_hub reads (TokenFile).
func TokenPath() string {
	p, _ := TokenFile()
	return p
}

// TokenFile is huggingface_hub's HF_TOKEN_PATH and the variable that chose
// it: $HF_TOKEN_PATH, else $HF_HOME/token, else
// $XDG_CACHE_HOME/huggingface/token, else ~/.cache/huggingface/token ("" and
// hfcache.SourceDefault when the home folder is unknown); a leading "~" and
// $VARS are expanded as Python's expanduser and expandvars do, and an empty
// variable counts as unset (as hfcache.CacheRoot has it).
func TokenFile() (path, source string) {
	if v := os.Getenv(EnvTokenPath); v != "" {
		return expandPath(v), EnvTokenPath
	}
	if v := os.Getenv(hfcache.EnvHFHome); v != "" {
		return filepath.Join(expandPath(v), "token"), hfcache.EnvHFHome
	}
	if v := os.Getenv(hfcache.EnvXDGCacheHome); v != "" {
		return filepath.Join(expandPath(v), "huggingface", "token"), hfcache.EnvXDGCacheHome
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return "", hfcache.SourceDefault
	}
	return filepath.Join(home, ".cache", "huggingface", "token"), hfcache.SourceDefault
}

// cleanToken is huggingface_hub's _clean_token: carriage returns and
// newlines removed, surrounding spaces trimmed.
func cleanToken(s string) string {
	return strings.TrimSpace(strings.NewReplacer("\r", "", "\n", "").Replace(s))
}

// expandPath is Python's os.path.expandvars(os.path.expanduser(p)): a
// leading "~" or "~/" becomes the home folder, then $NAME and ${NAME} of
// set variables their values (others are left as written).
func expandPath(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") || strings.HasPrefix(p, "~"+string(filepath.Separator)) {
		if home, err := os.UserHomeDir(); err == nil && home != "" {
			p = filepath.Join(home, p[1:])
		}
	}
	if !strings.Contains(p, "$") {
		return p
	}
	return os.Expand(p, func(name string) string {
		if v, ok := os.LookupEnv(name); ok {
			return v
		}
		return "${" + name + "}"
	})
}
