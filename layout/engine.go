package layout

import (
	"fmt"
	"slices"

	"github.com/dgq-dev/dgq/codecs"
)

// The original engine (mmastrac/diffgemma) runs a pack only when every
// tensor's class has a kernel for its kind (its TensorClass::supported_formats)
// and q8 tensors are matrices; it names profiles q4, q5, q6, nvfp4 and
// nvfp4_experts. docs/format.md §4 records the table with its source.

// engineFormats lists, per class, the formats the engine can run.
var engineFormats = map[Class][]codecs.Format{
	Experts: {codecs.Q4, codecs.Q6, codecs.NVFP4},
	Attn:    {codecs.Raw, codecs.Q8, codecs.Q4, codecs.NVFP4},
	Dense:   {codecs.Raw, codecs.Q8, codecs.Q4, codecs.NVFP4},
	SC:      {codecs.Raw, codecs.Q8, codecs.Q4, codecs.NVFP4},
	Vision:  {codecs.Raw, codecs.Q4, codecs.Q6, codecs.Q8, codecs.NVFP4},
}

// EngineRuns reports whether the engine has a kernel for a tensor of class c
// stored in f with the given rank (locked classes: raw only).
func EngineRuns(c Class, f codecs.Format, rank int) bool {
	switch {
	case f == codecs.Q8 && rank != 2:
		return false // the engine writes and reads q8_row matrices only
	case f.Quantized() && rank != 2 && rank != 3:
		return false // its block kinds are matrices or expert stacks
	}
	if c.Locked() {
		return f == codecs.Raw
	}
	return slices.Contains(engineFormats[c], f)
}

// EngineProfile is the profile a manifest names for a pack made with p: the
// engine's own name, except nvfp4x, which the engine writes as q4 with the
// experts overridden to nvfp4 (see CustomClasses). bf16 and q5 packs are
// dgq only; their profile is dgq's name.
func (p Profile) EngineProfile() string {
	if p == ProfileNVFP4X {
		return string(ProfileQ4)
	}
	return string(p)
}

// engineClassKeys are the engine's names of the overridable classes, in the
// order a --set target expands to them.
var engineClassKeys = map[string][]string{
	TargetExperts:       {TargetExpertsGateUp, TargetExpertsDown},
	TargetExpertsGateUp: {TargetExpertsGateUp},
	TargetExpertsDown:   {TargetExpertsDown},
	TargetAttn:          {TargetAttn},
	TargetDense:         {TargetDense},
	TargetSC:            {TargetSC},
	TargetVision:        {TargetVision},
}

// CustomClasses is the manifest's custom_classes for the policy: every
// overridden class (experts expands to both substacks) → the kind it is
// stored in, as the engine writes it; nvfp4x contributes experts → nvfp4
// first. Nil when nothing is overridden.
func (p Policy) CustomClasses() map[string]string {
	out := map[string]string{}
	set := func(o Override) {
		for _, k := range engineClassKeys[o.Target] {
			out[k] = o.Format.Kind()
		}
	}
	if p.Profile == ProfileNVFP4X {
		set(Override{Target: TargetExperts, Format: codecs.NVFP4})
	}
	for _, o := range p.Overrides {
		set(o)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// EngineIncompatibility says why the engine cannot run the plan's pack, or
// "" when it can: a dgq-only profile, a tensor whose class has no engine
// kernel for its format, or expert stacks of two formats (the engine
// dispatches both on one).
func (plan *Plan) EngineIncompatibility() string {
	switch plan.Profile {
	case ProfileBF16:
		return "profile bf16 stores the experts raw; the engine runs experts only as q4_block, q6_block or nvfp4_block"
	case ProfileQ5:
		return "profile q5 stores the experts as q5_block, a dgq-only kind"
	}
	for _, e := range plan.Entries {
		if !EngineRuns(e.Class, e.Format, len(e.Shape)) {
			return fmt.Sprintf("%s (class %s) is stored as %s, which the engine has no kernel for", e.Name, e.Class, e.Format.Kind())
		}
	}
	var first *Entry
	for i := range plan.Entries {
		e := &plan.Entries[i]
		if e.Class != Experts {
			continue
		}
		if first == nil {
			first = e
		} else if e.Format != first.Format {
			return fmt.Sprintf("%s is stored as %s and %s as %s; the engine runs both expert stacks in one kind",
				first.Name, first.Format.Kind(), e.Name, e.Format.Kind())
		}
	}
	return ""
}
