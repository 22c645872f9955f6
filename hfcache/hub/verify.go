package hub

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strconv"
)

// newDigest returns the hash a file's bytes are checked with: sha256 of
// the content for an LFS file (its lfs.oid), the git blob id for a regular
// file: sha1("blob <size>\x00" + content) (its oid).
func newDigest(e Entry) hash.Hash {
	if e.LFS {
		return sha256.New()
	}
	h := sha1.New()
	h.Write([]byte("blob " + strconv.FormatInt(e.Size, 10) + "\x00"))
	return h
}

// GitBlobID returns the git blob id of content, as the Hub lists it in
// the oid of a regular file.
func GitBlobID(content []byte) string {
	h := sha1.New()
	h.Write([]byte("blob " + strconv.Itoa(len(content)) + "\x00"))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// SHA256 returns the hex sha256 of content, as the Hub lists it in the
// lfs.oid of an LFS file.
func SHA256(content []byte) string {
	s := sha256.Sum256(content)
	return hex.EncodeToString(s[:])
}

// isHex reports whether s is n lower-case hex digits.
func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9') && !(c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// isCommit reports whether s is a full 40-hex lower-case commit id.
func isCommit(s string) bool { return isHex(s, 40) }
