package dgq

import (
	"path/filepath"
	"strings"
)

// PublicSource is what a manifest's source_model records for a source
// snapshot: its Hugging Face repo id ("ORG/NAME") when it came from a hub
// cache (repo non-empty), otherwise the name of its folder alone. A pack is
// published, so it never carries a path of the machine that made it; the
// revision is kept in the dgq object (Extension.Source).
func PublicSource(dir, repo string) string {
	if repo != "" {
		return repo
	}
	if dir == "" {
		return ""
	}
	name := filepath.Base(filepath.Clean(dir))
	if name == "." || name == ".." || name == string(filepath.Separator) {
		return ""
	}
	return name
}

// IsPrivatePath reports whether a manifest string is an absolute path of
// the machine that wrote it: a Unix or Windows absolute path, a UNC path or
// one starting at a home folder ("~/"). A repo id or a bare folder name is
// not.
func IsPrivatePath(s string) bool {
	switch {
	case s == "":
		return false
	case strings.HasPrefix(s, "/"), strings.HasPrefix(s, `\`), s == "~", strings.HasPrefix(s, "~/"), strings.HasPrefix(s, `~\`):
		return true
	case len(s) >= 3 && s[1] == ':' && (s[2] == '\\' || s[2] == '/') && isLetter(s[0]):
		return true
	}
	return filepath.IsAbs(s)
}

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// privatePathFindings notes each manifest field that holds an absolute path
// (a note, not an error: the pack is valid, but publishing it would leak
// where it was made).
func privatePathFindings(m *Manifest) []Finding {
	if !IsPrivatePath(m.SourceModel) {
		return nil
	}
	fix := "re-run dgq quantize (which records the repo id or the folder's name) or dgq repack"
	return []Finding{{Kind: KindPrivatePath, Message: "source_model holds the absolute path " + m.SourceModel +
		" of the machine that made the pack; a published pack would carry it (" + fix + ")"}}
}
