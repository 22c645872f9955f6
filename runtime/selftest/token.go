package selftest

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/dgq-dev/dgq/hfcache"
)

// The environment variables of huggingface_hub's token lookup
// (utils/_auth.py get_token, constants.py HF_TOKEN_PATH).
const (
	// EnvHFToken holds the token itself.
	EnvHFToken = "HF_TOKEN"
	// EnvHFTokenLegacy is the older name of HF_TOKEN, read when HF_TOKEN
	// is unset.
	EnvHFTokenLegacy = "HUGGING_FACE_HUB_TOKEN"
	// EnvHFTokenPath names the token file.
	EnvHFTokenPath = "HF_TOKEN_PATH"
)

// TokenSourceFile is TokenInfo.Source for a token read from the token file.
const TokenSourceFile = "file"

// maxTokenFile is how much of a token file is read (a token is ~40 bytes).
const maxTokenFile = 1 << 20

// TokenInfo says whether a Hugging Face token is configured and where,
// found as huggingface_hub finds it: HF_TOKEN, else HUGGING_FACE_HUB_TOKEN
// (the first that is set and not empty), else the token file — each with
// carriage returns and newlines removed and spaces trimmed, empty counting
// as none. It never holds the token or any part of it.
type TokenInfo struct {
	// Present: a token was found.
	Present bool `json:"present"`
	// Source is where: EnvHFToken, EnvHFTokenLegacy or TokenSourceFile; ""
	// when absent.
	Source string `json:"source,omitempty"`
	// File is the token file huggingface_hub reads: $HF_TOKEN_PATH, else
	// $HF_HOME/token, else $XDG_CACHE_HOME/huggingface/token, else
	// ~/.cache/huggingface/token (a leading ~ and $VARS expanded); ""
	// when the home folder is unknown. FileSource names the variable that
	// chose it, or "default".
	File       string `json:"file,omitempty"`
	FileSource string `json:"file_source,omitempty"`
	// Error says why the file could not be read (never its content); ""
	// when it was read or does not exist.
	Error string `json:"error,omitempty"`
}

// findToken looks for a Hugging Face token (TokenInfo).
func findToken() TokenInfo {
	var t TokenInfo
	t.File, t.FileSource = tokenFile()
	for _, name := range []string{EnvHFToken, EnvHFTokenLegacy} {
		if v := os.Getenv(name); v != "" {
			// huggingface_hub takes the first set variable and cleans it;
			// one that cleans to nothing falls through to the file.
			if cleanToken(v) != "" {
				t.Present, t.Source = true, name
				return t
			}
			break
		}
	}
	if t.File == "" {
		return t
	}
	present, err := tokenFileHolds(t.File)
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		t.Error = oneLine(err.Error())
	case present:
		t.Present, t.Source = true, TokenSourceFile
	}
	return t
}

// tokenFile is huggingface_hub's HF_TOKEN_PATH and the variable that chose
// it. An empty variable counts as unset (as hfcache.CacheRoot has it).
func tokenFile() (path, source string) {
	if v := os.Getenv(EnvHFTokenPath); v != "" {
		return expandPath(v), EnvHFTokenPath
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

// tokenFileHolds reports whether the file at path holds a token (anything
// but whitespace). The content is looked at here and nowhere else.
func tokenFileHolds(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile))
	if err != nil {
		return false, err
	}
	return cleanToken(string(b)) != "", nil
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
