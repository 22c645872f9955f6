package hub

import (
	"net/url"
	"os"
	"strings"
)

// The environment variables the download reads; they are huggingface_hub's
// contract, read the same way (an empty variable counts as unset).
const (
	// EnvEndpoint is the Hub's base URL (default DefaultEndpoint).
	EnvEndpoint = "HF_ENDPOINT"
	// EnvToken is the access token.
	EnvToken = "HF_TOKEN"
	// EnvTokenLegacy is the older name of HF_TOKEN, read when it is unset.
	EnvTokenLegacy = "HUGGING_FACE_HUB_TOKEN"
	// EnvTokenPath names the token file (default $HF_HOME/token).
	EnvTokenPath = "HF_TOKEN_PATH"
	// EnvOffline, when true ("1", "ON", "YES" or "TRUE", any case), forbids
	// every network access.
	EnvOffline = "HF_HUB_OFFLINE"
	// EnvOfflineTransformers is the transformers spelling of EnvOffline,
	// honoured as huggingface_hub does.
	EnvOfflineTransformers = "TRANSFORMERS_OFFLINE"
)

// DefaultEndpoint is the Hub's URL when HF_ENDPOINT is unset.
const DefaultEndpoint = "https://huggingface.co"

// maxTokenFile bounds what is read from the token file.
const maxTokenFile = 64 << 10

// EndpointFromEnv returns HF_ENDPOINT, or DefaultEndpoint, without a
// trailing "/".
func EndpointFromEnv() string {
	if v := os.Getenv(EnvEndpoint); v != "" {
		return strings.TrimRight(v, "/")
	}
	return DefaultEndpoint
}

// parseEndpoint checks an endpoint: an http or https URL with a host, no
// query or fragment; a path prefix is kept.
func parseEndpoint(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(s, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return nil, failf(ErrOptions, "endpoint %s is not an http(s) URL (set %s to the Hub's base URL, e.g. %s)", shown(s), EnvEndpoint, DefaultEndpoint)
	}
	return u, nil
}

// validToken reports whether t can be sent in a header (visible ASCII).
func validToken(t string) bool {
	for i := 0; i < len(t); i++ {
		if t[i] <= ' ' || t[i] >= 0x7f {
			return false
		}
	}
	return true
}

// OfflineFromEnv reports whether HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE
// when it is unset) is true: "1", "ON", "YES" or "TRUE" in any case.
func OfflineFromEnv() bool {
	v := os.Getenv(EnvOffline)
	if v == "" {
		v = os.Getenv(EnvOfflineTransformers)
	}
	switch strings.ToUpper(v) {
	case "1", "ON", "YES", "TRUE":
		return true
	}
	return false
}
