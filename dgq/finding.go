package dgq

import (
	"fmt"
	"strings"
)

// Finding is one broken rule of a pack. Tensor is empty for pack-level
// findings. Kind is a stable machine-readable identifier (the Kind* constants).
type Finding struct {
	Tensor  string `json:"tensor"`
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

func (f Finding) String() string {
	if f.Tensor == "" {
		return fmt.Sprintf("%s: %s", f.Kind, f.Message)
	}
	return fmt.Sprintf("%s: %s: %s", f.Kind, f.Tensor, f.Message)
}

// Finding kinds.
const (
	KindManifest    = "manifest"     // pack-level field missing or malformed
	KindVersion     = "version"      // unknown or inconsistent format version
	KindUnknownKind = "unknown_kind" // unknown class, format or dtype
	KindName        = "name"         // empty, over-long or duplicate tensor name
	KindShape       = "shape"        // malformed shape
	KindSize        = "size"         // size differs from what shape and format imply
	KindDims        = "dims"         // shape not storable in the format
	KindAlignment   = "alignment"    // offset not a multiple of 64
	KindBounds      = "bounds"       // offset+size overflows or leaves the blob
	KindOverlap     = "overlap"      // two tensors share bytes
	KindClass       = "class"        // class does not match the tensor name, or a locked class is quantized
	KindExpertSplit = "expert_split" // expert tail misplaced or split misaligned
	KindDigest      = "digest"       // digest malformed or not matching the bytes
	KindSource      = "source"       // layered source malformed
	KindBlob        = "blob"         // blob missing or of the wrong size
	KindFile        = "file"         // copied side file missing or altered
	KindStale       = "stale"        // a pinned external file is missing or differs (message has the fix)
	KindPadding     = "padding"      // a byte between tensors is not zero
	KindNonFinite   = "non_finite"   // (audit --deep) a tensor decodes to NaN or infinity
	KindNoDigests   = "no_digests"   // a note, not an error: tensors without digests cannot be verified
	KindPrivatePath = "private_path" // a note, not an error: the manifest holds an absolute path of the machine that wrote it
)

// Note reports whether the finding is informational: it does not make a
// pack invalid (audit stays OK).
func (f Finding) Note() bool { return f.Kind == KindNoDigests || f.Kind == KindPrivatePath }

// InvalidError carries every finding of a pack that failed validation.
type InvalidError struct {
	Dir      string
	Findings []Finding
}

func (e *InvalidError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "dgq: invalid pack %s: %d problem(s): ", e.Dir, len(e.Findings))
	for i, f := range e.Findings {
		if i == 3 {
			fmt.Fprintf(&b, "; … (run dgq audit for all)")
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(f.String())
	}
	return b.String()
}

// Unwrap lets errors.Is(err, ErrInvalid) match.
func (e *InvalidError) Unwrap() error { return ErrInvalid }
