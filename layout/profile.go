package layout

import (
	"fmt"
	"strings"

	"github.com/dgq-dev/dgq/codecs"
)

// Profile is a named base policy that --set overrides refine.
type Profile string

const (
	ProfileBF16   Profile = "bf16"   // nothing quantized: the lossless validation pack (dgq only)
	ProfileQ4     Profile = "q4"     // experts q4, sc q8, everything else raw
	ProfileQ5     Profile = "q5"     // experts in a real 5-bit q5, sc q8, everything else raw (dgq only)
	ProfileQ6     Profile = "q6"     // experts q6, sc q8, everything else raw
	ProfileNVFP4  Profile = "nvfp4"  // experts, attn, dense and vision linears nvfp4, sc q8
	ProfileNVFP4X Profile = "nvfp4x" // q4 with experts nvfp4 (the engine's q4 + --set experts=nvfp4)
)

// Profiles lists every profile.
func Profiles() []Profile {
	return []Profile{ProfileBF16, ProfileQ4, ProfileQ5, ProfileQ6, ProfileNVFP4, ProfileNVFP4X}
}

// Valid reports whether p is a known profile.
func (p Profile) Valid() bool {
	for _, q := range Profiles() {
		if p == q {
			return true
		}
	}
	return false
}

func (p Profile) String() string { return string(p) }

// ParseProfile parses a profile name, case-insensitively (Q4 is q4).
func ParseProfile(s string) (Profile, error) {
	if p := Profile(strings.ToLower(s)); p.Valid() {
		return p, nil
	}
	return "", profileError(s)
}

// profileError is the refusal of an unknown profile name.
func profileError(s string) error {
	return fmt.Errorf("%w %q (valid: bf16, q4, q5, q6, nvfp4, nvfp4x)", ErrProfile, s)
}

// Base is the format the profile gives a tensor of class c and role r,
// before overrides — the engine's classify_tensor for its profiles. Locked
// classes are raw in every profile; an unknown profile or class gives
// FormatInvalid.
func (p Profile) Base(c Class, r Role) codecs.Format {
	if !c.Valid() || !p.Valid() {
		return codecs.FormatInvalid
	}
	if c.Locked() || p == ProfileBF16 {
		return codecs.Raw
	}
	switch {
	case c == SC:
		return codecs.Q8
	case p == ProfileNVFP4:
		if c == Vision && r == RoleProjection {
			return codecs.Raw
		}
		return codecs.NVFP4 // experts, attn, dense, vision linears
	case c == Experts:
		switch p {
		case ProfileQ4:
			return codecs.Q4
		case ProfileQ5:
			return codecs.Q5
		case ProfileQ6:
			return codecs.Q6
		case ProfileNVFP4X:
			return codecs.NVFP4
		}
	}
	return codecs.Raw
}
