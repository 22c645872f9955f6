package hfcache

import (
	"os"
	"path/filepath"
	"strings"
)

// The environment variables CacheRoot consults, first match wins.
const (
	// EnvDGQHFHome names the hub cache folder itself (the folder holding
	// models--ORG--NAME/), overriding every Hugging Face variable.
	EnvDGQHFHome = "DGQ_HF_HOME"
	// EnvHFHubCache is huggingface_hub's hub cache folder.
	EnvHFHubCache = "HF_HUB_CACHE"
	// EnvHFHubCacheLegacy is the older spelling of HF_HUB_CACHE.
	EnvHFHubCacheLegacy = "HUGGINGFACE_HUB_CACHE"
	// EnvHFHome is huggingface_hub's home; the hub cache is $HF_HOME/hub.
	EnvHFHome = "HF_HOME"
	// EnvXDGCacheHome: the hub cache is $XDG_CACHE_HOME/huggingface/hub.
	EnvXDGCacheHome = "XDG_CACHE_HOME"
	// SourceDefault is CacheRoot's source when no variable is set: the hub
	// cache is ~/.cache/huggingface/hub.
	SourceDefault = "default"
)

// CacheRoot returns the hub cache directory and which variable chose it (for
// messages and docs): the first non-empty one of
//
//	DGQ_HF_HOME            the hub cache folder itself
//	HF_HUB_CACHE           the hub cache folder itself
//	HUGGINGFACE_HUB_CACHE  the hub cache folder itself (legacy name)
//	HF_HOME                $HF_HOME/hub
//	XDG_CACHE_HOME         $XDG_CACHE_HOME/huggingface/hub
//
// and otherwise ~/.cache/huggingface/hub with source "default" (dir is ""
// when the home folder is unknown). An empty variable counts as unset. A
// leading "~" or "~/" is expanded to the home folder, as huggingface_hub
// does; the result is cleaned but not made absolute.
func CacheRoot() (dir string, source string) {
	for _, name := range []string{EnvDGQHFHome, EnvHFHubCache, EnvHFHubCacheLegacy} {
		if v := os.Getenv(name); v != "" {
			return filepath.Clean(expandHome(v)), name
		}
	}
	if v := os.Getenv(EnvHFHome); v != "" {
		return filepath.Join(expandHome(v), "hub"), EnvHFHome
	}
	if v := os.Getenv(EnvXDGCacheHome); v != "" {
		return filepath.Join(expandHome(v), "huggingface", "hub"), EnvXDGCacheHome
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return "", SourceDefault
	}
	return filepath.Join(home, ".cache", "huggingface", "hub"), SourceDefault
}

// expandHome replaces a leading "~" (alone or followed by a separator) with
// the home folder; other values are returned unchanged.
func expandHome(p string) string {
	if p != "~" && !strings.HasPrefix(p, "~/") && !strings.HasPrefix(p, "~"+string(filepath.Separator)) {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return p
	}
	return filepath.Join(home, p[1:])
}

// describeRoot names a cache root and its source for an error message.
func describeRoot(root, source string) string {
	switch source {
	case "":
		return display(root)
	case SourceDefault:
		return display(root) + " (the default; set HF_HUB_CACHE or DGQ_HF_HOME to change it)"
	default:
		return display(root) + " (from " + source + ")"
	}
}

// IsInCache reports whether path lies inside the hub cache (dgq must never
// write there): inside CacheRoot() (the root itself included), compared both
// as written and with symlinks resolved (for a path that does not exist
// yet, those of its deepest existing ancestor), or anywhere Detect
// recognizes as a snapshot of a hub cache, whatever its root.
func IsInCache(path string) bool {
	if path == "" {
		return false
	}
	p, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	if _, _, ok := Detect(p); ok {
		return true
	}
	rp := resolveExisting(p)
	if _, _, ok := Detect(rp); ok {
		return true
	}
	root, _ := CacheRoot()
	if root == "" {
		return false
	}
	r, err := filepath.Abs(root)
	if err != nil {
		return false
	}
	rr := resolveExisting(r)
	for _, a := range []string{p, rp} {
		for _, b := range []string{r, rr} {
			if within(a, b) {
				return true
			}
		}
	}
	return false
}

// within reports whether the absolute, clean path p is dir or lies under it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel))
}

// resolveExisting evaluates the symlinks of the absolute path p; when p
// does not exist, those of its deepest existing ancestor, with the rest
// appended. It returns p unchanged when nothing resolves.
func resolveExisting(p string) string {
	rest := ""
	for cur := p; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			if rest == "" {
				return r
			}
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		if rest == "" {
			rest = filepath.Base(cur)
		} else {
			rest = filepath.Join(filepath.Base(cur), rest)
		}
		cur = parent
	}
}
