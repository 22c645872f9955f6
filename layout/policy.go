package layout

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dgq-dev/dgq/codecs"
)

// Override targets of --set, in canonical order.
const (
	TargetExperts       = "experts"
	TargetExpertsGateUp = "experts.gate_up"
	TargetExpertsDown   = "experts.down"
	TargetAttn          = "attn"
	TargetDense         = "dense"
	TargetSC            = "sc"
	TargetVision        = "vision"
)

var targets = []string{TargetExperts, TargetExpertsGateUp, TargetExpertsDown, TargetAttn, TargetDense, TargetSC, TargetVision}

// Targets lists the valid --set targets in canonical order.
func Targets() []string { return append([]string(nil), targets...) }

func targetRank(t string) int {
	for i, u := range targets {
		if u == t {
			return i
		}
	}
	return -1
}

// lockedTargets are names a user may try to --set that are locked, with the
// reason printed in the refusal.
var lockedTargets = map[string]string{
	"embed":         "tied to lm_head and the self-conditioning soft-embedding",
	"embed_tokens":  "tied to lm_head and the self-conditioning soft-embedding",
	"lm_head":       "tied to the embedding and the self-conditioning soft-embedding",
	"router":        "routing is precision-sensitive and the tensors are tiny",
	"norm":          "norms are tiny and precision-sensitive",
	"norms":         "norms are tiny and precision-sensitive",
	"layer_scalar":  "layer scalars are tiny and precision-sensitive",
	"layer_scalars": "layer scalars are tiny and precision-sensitive",
}

// Override is one --set target=format.
type Override struct {
	Target string        `json:"target"`
	Format codecs.Format `json:"format"`
}

func (o Override) String() string { return o.Target + "=" + o.Format.String() }

// formatAliases are names --set accepts for a format besides its own:
// bf16 stores the tensor as the checkpoint holds it, which is raw.
var formatAliases = map[string]string{"bf16": "raw"}

// ParseOverride parses a --set value of the form target=format. Target and
// format are case-insensitive, and bf16 is read as raw. A locked target is an
// error wrapping ErrLocked that gives the reason; an unknown target wraps
// ErrTarget; an unknown format wraps codecs.ErrUnknownFormat.
func ParseOverride(s string) (Override, error) {
	target, format, ok := strings.Cut(s, "=")
	target, format = strings.ToLower(strings.TrimSpace(target)), strings.ToLower(strings.TrimSpace(format))
	if !ok || target == "" || format == "" {
		return Override{}, fmt.Errorf("%w %q: want target=format, e.g. experts=q6", ErrOverrideSyntax, s)
	}
	if err := checkTarget(target); err != nil {
		return Override{}, err
	}
	if alias, ok := formatAliases[format]; ok {
		format = alias
	}
	f, err := codecs.ParseFormat(format)
	if err != nil {
		return Override{}, fmt.Errorf("layout: --set %s: %w", s, err)
	}
	return Override{Target: target, Format: f}, nil
}

// splitSets cuts --set values into single target=format items: one value
// may hold several, separated by commas (--set attn=q8,dense=q8).
func splitSets(sets []string) []string {
	var out []string
	for _, s := range sets {
		out = append(out, strings.Split(s, ",")...)
	}
	return out
}

func checkTarget(target string) error {
	if reason, ok := lockedTargets[target]; ok {
		return fmt.Errorf("%w: %s is always raw: %s", ErrLocked, target, reason)
	}
	if targetRank(target) < 0 {
		return fmt.Errorf("%w %q (valid: %s)", ErrTarget, target, strings.Join(targets, ", "))
	}
	return nil
}

// Policy is a profile plus --set overrides. Build one with NewPolicy, which
// validates it and puts the overrides in canonical order.
type Policy struct {
	Profile   Profile
	Overrides []Override
}

// NewPolicy parses a profile name and --set values (each value one
// target=format or several separated by commas). Every malformed value is
// reported (errors.Join). Setting one target twice to different formats wraps
// ErrDuplicate. Repeated identical values are merged, and the overrides are
// stored in canonical target order. experts.gate_up and experts.down may
// resolve to different formats: such a pack is dgq-only
// (Plan.EngineIncompatibility).
func NewPolicy(profile string, sets []string) (Policy, error) {
	prof, err := ParseProfile(profile)
	if err != nil {
		return Policy{}, err
	}
	var errs []error
	var ovs []Override
	for _, s := range splitSets(sets) {
		o, err := ParseOverride(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ovs = append(ovs, o)
	}
	if len(errs) > 0 {
		return Policy{}, errors.Join(errs...)
	}
	merged, err := mergeOverrides(ovs)
	if err != nil {
		return Policy{}, err
	}
	return Policy{Profile: prof, Overrides: merged}, nil
}

// mergeOverrides drops repeated identical overrides, refuses conflicting ones
// and sorts the rest in canonical target order.
func mergeOverrides(ovs []Override) ([]Override, error) {
	byTarget := map[string]codecs.Format{}
	var errs []error
	for _, o := range ovs {
		prev, seen := byTarget[o.Target]
		switch {
		case !seen:
			byTarget[o.Target] = o.Format
		case prev != o.Format:
			errs = append(errs, fmt.Errorf("%w %s: %s and %s", ErrDuplicateSet, o.Target, prev, o.Format))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var out []Override
	for _, t := range targets {
		if f, ok := byTarget[t]; ok {
			out = append(out, Override{Target: t, Format: f})
		}
	}
	return out, nil
}

// Validate checks a policy built by hand or decoded from a manifest: a known
// profile (its exact name), known unlocked targets, valid formats and no
// conflicting duplicates.
func (p Policy) Validate() error {
	if !p.Profile.Valid() {
		return profileError(string(p.Profile))
	}
	var errs []error
	for _, o := range p.Overrides {
		if err := checkTarget(o.Target); err != nil {
			errs = append(errs, err)
		}
		if !o.Format.Valid() {
			errs = append(errs, fmt.Errorf("layout: --set %s: %w: %d", o.Target, codecs.ErrUnknownFormat, uint8(o.Format)))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	_, err := mergeOverrides(p.Overrides)
	return err
}

// Format resolves the storage format of a tensor of class c and role r:
// locked classes are raw; otherwise the profile's base format, replaced by a
// class override, and for experts by a role override (experts.gate_up,
// experts.down). Experts with RoleNone resolve as gate_up. An invalid class
// or profile gives codecs.FormatInvalid.
func (p Policy) Format(c Class, r Role) codecs.Format {
	f := p.Profile.Base(c, r)
	if !f.Valid() || c.Locked() {
		return f
	}
	f = p.lookup(classTarget(c), f)
	if c == Experts {
		if r == RoleDown {
			f = p.lookup(TargetExpertsDown, f)
		} else {
			f = p.lookup(TargetExpertsGateUp, f)
		}
	}
	return f
}

func (p Policy) lookup(target string, def codecs.Format) codecs.Format {
	for _, o := range p.Overrides {
		if o.Target == target {
			def = o.Format
		}
	}
	return def
}

// classTarget is the --set target naming a whole unlocked class.
func classTarget(c Class) string {
	switch c {
	case Experts:
		return TargetExperts
	case Attn:
		return TargetAttn
	case Dense:
		return TargetDense
	case SC:
		return TargetSC
	case Vision:
		return TargetVision
	}
	return ""
}

// roleTarget is the --set target of one expert role.
func roleTarget(r Role) string {
	if r == RoleDown {
		return TargetExpertsDown
	}
	return TargetExpertsGateUp
}

// hasRoleOverride reports whether experts.gate_up or experts.down is set.
func (p Policy) hasRoleOverride() bool {
	for _, o := range p.Overrides {
		if o.Target == TargetExpertsGateUp || o.Target == TargetExpertsDown {
			return true
		}
	}
	return false
}
