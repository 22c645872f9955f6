package dgq

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/zeebo/blake3"

	"github.com/dgq-dev/dgq/hfcache"
)

// maxSideFileBytes bounds each copied file (a real tokenizer.json is 33 MB).
const maxSideFileBytes = 256 << 20

// sideFileNames picks the snapshot files a pack carries: config.json (which
// the inventory already required), generation_config.json, tokenizer*.json
// and chat templates.
func sideFileNames(snap *hfcache.Snapshot) ([]string, error) {
	entries, err := os.ReadDir(snap.Dir)
	if err != nil {
		return nil, fmt.Errorf("dgq: list %s: %w", snap.Dir, err)
	}
	var names []string
	for _, e := range entries {
		if isSideFile(e.Name()) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

func isSideFile(name string) bool {
	if strings.Contains(name, "/") {
		return false
	}
	switch {
	case name == "config.json", name == "generation_config.json":
		return true
	case strings.HasPrefix(name, "tokenizer") && strings.HasSuffix(name, ".json"):
		return true
	case strings.HasPrefix(name, "chat_template") && (path.Ext(name) == ".jinja" || path.Ext(name) == ".json"):
		return true
	}
	return false
}

// copySideFiles copies the side files into the staging directory and records
// their sizes and digests.
func copySideFiles(st *Staging, snap *hfcache.Snapshot) ([]File, error) {
	names, err := sideFileNames(snap)
	if err != nil {
		return nil, err
	}
	var files []File
	for _, name := range names {
		data, err := snap.ReadFile(name, maxSideFileBytes)
		if err != nil {
			if errors.Is(err, hfcache.ErrMissingFile) {
				continue
			}
			return nil, err
		}
		if err := st.WriteFile(name, data); err != nil {
			return nil, err
		}
		files = append(files, File{Name: name, Size: int64(len(data)), Digest: digestBytes(data)})
	}
	return files, nil
}

func digestBytes(b []byte) string {
	s := blake3.Sum256(b)
	return hex.EncodeToString(s[:])
}
