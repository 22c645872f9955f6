package layout

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dgq-dev/dgq/codecs"
)

// TensorAlign is the alignment of every tensor's canonical offset.
const TensorAlign = 64

// ExpertSplitAlign is the alignment of the start of the expert tail (the
// 16 KiB Apple page, so the blob can be exposed as two no-copy buffers).
const ExpertSplitAlign = 16384

// Tensor is a checkpoint tensor as an inventory sees it.
type Tensor struct {
	Name  string
	DType codecs.DType
	Shape []int64
}

// Entry is one tensor of a plan: its class and role, the format it is
// stored in, its source dtype and shape, and its canonical place in the blob.
type Entry struct {
	Name   string
	Class  Class
	Role   Role
	Format codecs.Format
	DType  codecs.DType
	Shape  []int64
	Offset int64 // a multiple of TensorAlign
	Size   int64 // Format.EncodedSize of the tensor
}

// Plan is every decision of a quantization run, as plain data. Entries hold
// the head (every non-expert tensor, in byte-wise name order) followed by
// the tail (the experts, in byte-wise name order, starting at ExpertSplit):
// the engine's order.
type Plan struct {
	Profile     Profile
	Overrides   []Override
	Entries     []Entry
	HasExperts  bool  // whether there is a tail (and so an expert_split)
	ExpertSplit int64 // start of the expert tail, a multiple of ExpertSplitAlign (0 without experts)
	BlobSize    int64 // end of the last tensor
}

// MakePlan classifies every tensor, resolves its format under p, checks that
// its shape fits the format and lays the blob out. Every refusal (unknown
// name, bad dtype or shape, dimensions that do not fit, duplicate name) is
// collected; the error joins them all, each a *TensorError naming the tensor,
// its shape, the rule and the fix where there is one. The result does not
// depend on the order of tensors.
func MakePlan(p Policy, tensors []Tensor) (*Plan, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if len(tensors) == 0 {
		return nil, fmt.Errorf("%w: no tensors", ErrInventory)
	}
	sorted := slices.Clone(tensors)
	slices.SortStableFunc(sorted, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) })
	var errs []error
	entries := make([]Entry, 0, len(sorted))
	for i := 0; i < len(sorted); {
		j := i + 1
		for j < len(sorted) && sorted[j].Name == sorted[i].Name {
			j++
		}
		t := sorted[i]
		if j-i > 1 {
			errs = append(errs, &TensorError{Name: t.Name, Shape: slices.Clone(t.Shape),
				Rule: fmt.Sprintf("the name appears %d times", j-i), Err: ErrDuplicate})
		} else if e, err := planEntry(p, t); err != nil {
			errs = append(errs, err)
		} else {
			entries = append(entries, e)
		}
		i = j
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// Head (non-experts) then tail (experts), each still in name order.
	slices.SortStableFunc(entries, func(a, b Entry) int {
		switch ea, eb := a.Class == Experts, b.Class == Experts; {
		case ea == eb:
			return 0
		case eb:
			return -1
		}
		return 1
	})
	plan := &Plan{Profile: p.Profile, Overrides: slices.Clone(p.Overrides), Entries: entries}
	if err := plan.assignOffsets(); err != nil {
		return nil, err
	}
	return plan, nil
}

func planEntry(p Policy, t Tensor) (Entry, error) {
	shape := slices.Clone(t.Shape)
	c, r, err := Classify(t.Name, len(shape))
	if err != nil {
		return Entry{}, &TensorError{Name: t.Name, Shape: shape,
			Rule: "unknown tensor name (not part of the DiffusionGemma checkpoint layout)", Err: err}
	}
	f := p.Format(c, r)
	fail := func(rule, fix string, err error) (Entry, error) {
		return Entry{}, &TensorError{Name: t.Name, Shape: shape, Class: c, Format: f, Rule: rule, Fix: fix, Err: err}
	}
	if !t.DType.Valid() {
		return fail(fmt.Sprintf("unsupported dtype %s", t.DType), "", codecs.ErrUnknownDType)
	}
	m, err := codecs.FlattenShape(shape)
	if err != nil {
		return fail(err.Error(), "", err)
	}
	if err := f.CheckDims(shape); err != nil {
		if !errors.Is(err, codecs.ErrDims) {
			return fail(err.Error(), "", err)
		}
		return fail(dimsRule(f, shape), p.dimsFix(c, r, f, shape), ErrDims)
	}
	size, err := f.EncodedSize(t.DType, m)
	if err != nil {
		return fail(err.Error(), "", err)
	}
	return Entry{Name: t.Name, Class: c, Role: r, Format: f, DType: t.DType, Shape: shape, Size: size}, nil
}

func dimsRule(f codecs.Format, shape []int64) string {
	if f == codecs.Q8 {
		return fmt.Sprintf("q8 needs rank >= 2, the tensor has rank %d", len(shape))
	}
	k := int64(0)
	if len(shape) > 0 {
		k = shape[len(shape)-1]
	}
	return fmt.Sprintf("%s needs the last dimension (%d) to be a multiple of %d", f, k, f.GroupSize())
}

// dimsFix suggests the closest format that fits the shape, as the --set that
// selects it (for experts under a role override, the role's target), and
// lists every format that would.
func (p Policy) dimsFix(c Class, r Role, f codecs.Format, shape []int64) string {
	var legal []string
	for _, g := range codecs.Formats() {
		if g.CheckDims(shape) == nil {
			legal = append(legal, g.String())
		}
	}
	best := codecs.Raw
	for _, g := range fixPreference(f) {
		if g.CheckDims(shape) == nil {
			best = g
			break
		}
	}
	set := fmt.Sprintf("--set %s=%s", classTarget(c), best)
	if c == Experts && p.hasRoleOverride() {
		set = fmt.Sprintf("--set %s=%s", roleTarget(r), best)
	}
	return fmt.Sprintf("use %s (formats that fit this shape: %s)", set, strings.Join(legal, ", "))
}

// fixPreference orders the replacements for a format that does not fit:
// the same bit width first, then more bits, raw last.
func fixPreference(f codecs.Format) []codecs.Format {
	switch f {
	case codecs.Q4:
		return []codecs.Format{codecs.NVFP4, codecs.Q8}
	case codecs.Q5, codecs.Q6, codecs.NVFP4:
		return []codecs.Format{codecs.Q8}
	}
	return nil
}

// assignOffsets lays the head out from 0 and the tail from ExpertSplit
// (the end of the head rounded up to ExpertSplitAlign), every tensor at a
// multiple of TensorAlign; the blob ends at the end of the last tensor.
func (plan *Plan) assignOffsets() error {
	var off int64
	for i := range plan.Entries {
		e := &plan.Entries[i]
		align := int64(TensorAlign)
		if e.Class == Experts && !plan.HasExperts {
			align, plan.HasExperts = ExpertSplitAlign, true
		}
		var err error
		if off, err = codecs.AlignUp(off, align); err != nil {
			return err
		}
		if align == ExpertSplitAlign {
			plan.ExpertSplit = off
		}
		e.Offset = off
		if off > (1<<63-1)-e.Size {
			return fmt.Errorf("layout: blob size overflows at %s", e.Name)
		}
		off += e.Size
	}
	plan.BlobSize = off
	return nil
}

// NaturalCompare orders names with runs of digits compared by value, so
// layers.2 sorts before layers.10. Names equal under that order (leading
// zeros) fall back to plain byte order, so the order is total.
func NaturalCompare(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if isDigit(a[i]) && isDigit(b[j]) {
			ei, ej := digitsEnd(a, i), digitsEnd(b, j)
			if c := compareDigits(a[i:ei], b[j:ej]); c != 0 {
				return c
			}
			i, j = ei, ej
			continue
		}
		if a[i] != b[j] {
			if a[i] < b[j] {
				return -1
			}
			return 1
		}
		i++
		j++
	}
	switch {
	case len(a)-i < len(b)-j:
		return -1
	case len(a)-i > len(b)-j:
		return 1
	}
	return strings.Compare(a, b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digitsEnd(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

// compareDigits compares two digit runs by value, without overflow.
func compareDigits(x, y string) int {
	x, y = strings.TrimLeft(x, "0"), strings.TrimLeft(y, "0")
	if len(x) != len(y) {
		if len(x) < len(y) {
			return -1
		}
		return 1
	}
	return strings.Compare(x, y)
}
