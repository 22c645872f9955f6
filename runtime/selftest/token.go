package selftest

import (
	"github.com/dgq-dev/dgq/hfcache/hub"
)

// The environment variables of huggingface_hub's token lookup, as package
// hub reads them (hub.LookupToken).
const (
	// EnvHFToken holds the token itself.
	EnvHFToken = hub.EnvToken
	// EnvHFTokenLegacy is the older name of HF_TOKEN, read when HF_TOKEN
	// is unset.
	EnvHFTokenLegacy = hub.EnvTokenLegacy
	// EnvHFTokenPath names the token file.
	EnvHFTokenPath = hub.EnvTokenPath
)

// TokenSourceFile is TokenInfo.Source for a token read from the token file.
const TokenSourceFile = hub.TokenSourceFile

// TokenInfo says whether a Hugging Face token is configured and where, as
// dgq download finds it (hub.LookupToken, huggingface_hub's order). It
// never holds the token or any part of it.
type TokenInfo struct {
	// Present: a token was found.
	Present bool `json:"present"`
	// Source is where: EnvHFToken, EnvHFTokenLegacy or TokenSourceFile; ""
	// when absent.
	Source string `json:"source,omitempty"`
	// File is the token file huggingface_hub reads (hub.TokenFile); "" when
	// the home folder is unknown. FileSource names the variable that chose
	// it, or "default".
	File       string `json:"file,omitempty"`
	FileSource string `json:"file_source,omitempty"`
	// Error says why the file could not be read (never its content); ""
	// when it was read or does not exist.
	Error string `json:"error,omitempty"`
}

// findToken looks for a Hugging Face token (TokenInfo).
func findToken() TokenInfo {
	t, err := hub.LookupToken()
	info := TokenInfo{Present: t.Value != "", Source: t.Source, File: t.File, FileSource: t.FileSource}
	if err != nil {
		info.Error = oneLine(err.Error())
	}
	return info
}
