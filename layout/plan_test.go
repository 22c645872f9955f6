package layout

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
)

// checkPlan verifies the structural invariants of a plan.
func checkPlan(t *testing.T, plan *Plan, p Policy, n int) {
	t.Helper()
	if len(plan.Entries) != n {
		t.Fatalf("%d entries, want %d", len(plan.Entries), n)
	}
	if plan.ExpertSplit%ExpertSplitAlign != 0 {
		t.Errorf("ExpertSplit %d not a multiple of %d", plan.ExpertSplit, ExpertSplitAlign)
	}
	var end int64
	inTail := false
	for i, e := range plan.Entries {
		if e.Offset%TensorAlign != 0 {
			t.Errorf("%s: offset %d not a multiple of %d", e.Name, e.Offset, TensorAlign)
		}
		if e.Offset < end {
			t.Errorf("%s: offset %d overlaps the previous tensor ending at %d", e.Name, e.Offset, end)
		}
		if e.Class == Experts {
			if !inTail && e.Offset != plan.ExpertSplit {
				t.Errorf("first expert %s at %d, ExpertSplit %d", e.Name, e.Offset, plan.ExpertSplit)
			}
			inTail = true
		} else if inTail {
			t.Errorf("%s (%v) after the experts", e.Name, e.Class)
		} else if plan.HasExperts && e.Offset+e.Size > plan.ExpertSplit {
			t.Errorf("%s ends past ExpertSplit", e.Name)
		}
		if i > 0 && (plan.Entries[i-1].Class == Experts) == (e.Class == Experts) &&
			strings.Compare(plan.Entries[i-1].Name, e.Name) >= 0 {
			t.Errorf("%s not after %s", e.Name, plan.Entries[i-1].Name)
		}
		c, r, err := Classify(e.Name, len(e.Shape))
		if err != nil || c != e.Class || r != e.Role {
			t.Errorf("%s: class %v/%v, Classify says %v/%v %v", e.Name, e.Class, e.Role, c, r, err)
		}
		if f := p.Format(e.Class, e.Role); f != e.Format {
			t.Errorf("%s: format %v, policy says %v", e.Name, e.Format, f)
		}
		m, _ := codecs.FlattenShape(e.Shape)
		if size, err := e.Format.EncodedSize(e.DType, m); err != nil || size != e.Size {
			t.Errorf("%s: size %d, EncodedSize %d %v", e.Name, e.Size, size, err)
		}
		end = e.Offset + e.Size
	}
	if inTail && plan.BlobSize != end {
		t.Errorf("BlobSize %d, last tensor ends at %d", plan.BlobSize, end)
	}
	if !inTail && plan.BlobSize != plan.ExpertSplit {
		t.Errorf("no experts: BlobSize %d != ExpertSplit %d", plan.BlobSize, plan.ExpertSplit)
	}
}

func TestMakePlanTiny(t *testing.T) {
	tensors := tinyTensors(t)
	for _, prof := range Profiles() {
		for _, sets := range [][]string{nil, {"vision=q8"}, {"experts=q8", "attn=q4", "dense=nvfp4", "sc=raw"}} {
			p := mustPolicy(t, string(prof), sets...)
			plan, err := MakePlan(p, tensors)
			if err != nil {
				t.Fatalf("%s %v: %v", prof, sets, err)
			}
			checkPlan(t, plan, p, len(tensors))
			if plan.Profile != prof || !slices.Equal(plan.Overrides, p.Overrides) {
				t.Errorf("plan records %s %v", plan.Profile, plan.Overrides)
			}
		}
	}
	plan, _ := MakePlan(mustPolicy(t, "q4"), tensors)
	first := plan.Entries[0]
	if first.Name != "model.decoder.embed_tokens.weight" || first.Offset != 0 || first.Format != codecs.Raw {
		t.Errorf("first entry %+v", first)
	}
	last := plan.Entries[len(plan.Entries)-1]
	if last.Name != "model.decoder.layers.5.experts.gate_up_proj" || last.Format != codecs.Q4 || last.Role != RoleGateUp {
		t.Errorf("last entry %+v", last)
	}
}

func TestMakePlanShuffled(t *testing.T) {
	tensors := append(tinyTensors(t), synthLayers(12)...)
	p := mustPolicy(t, "q4", "attn=q8")
	want, err := MakePlan(p, tensors)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, want, p, len(tensors))
	for seed := range uint64(20) {
		shuffled := slices.Clone(tensors)
		rng := rand.New(rand.NewPCG(seed, 7))
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		got, err := MakePlan(p, shuffled)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: plan depends on input order", seed)
		}
	}
}

// synthLayers are decoder tensors of layers 10..10+n-1 (so that numeric
// order differs from byte order when layer 2 is added).
func synthLayers(n int) []Tensor {
	var out []Tensor
	for l := 10; l < 10+n; l++ {
		pre := fmt.Sprintf("model.decoder.layers.%d.", l)
		out = append(out,
			Tensor{pre + "input_layernorm.weight", codecs.BF16, []int64{64}},
			Tensor{pre + "self_attn.q_proj.weight", codecs.BF16, []int64{128, 64}},
			Tensor{pre + "experts.down_proj", codecs.BF16, []int64{8, 64, 32}},
			Tensor{pre + "experts.gate_up_proj", codecs.BF16, []int64{8, 64, 64}},
		)
	}
	return out
}

// TestMakePlanByteOrder: the engine orders names byte-wise (Rust's String
// order), experts last, so layers.10 precedes layers.2.
func TestMakePlanByteOrder(t *testing.T) {
	tensors := synthLayers(3) // layers 10, 11, 12
	tensors = append(tensors,
		Tensor{"model.decoder.layers.2.input_layernorm.weight", codecs.BF16, []int64{64}},
		Tensor{"model.decoder.layers.2.experts.down_proj", codecs.BF16, []int64{8, 64, 32}},
	)
	plan, err := MakePlan(mustPolicy(t, "q4"), tensors)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range plan.Entries {
		names = append(names, strings.TrimPrefix(e.Name, "model.decoder.layers."))
	}
	want := []string{
		"10.input_layernorm.weight", "10.self_attn.q_proj.weight",
		"11.input_layernorm.weight", "11.self_attn.q_proj.weight",
		"12.input_layernorm.weight", "12.self_attn.q_proj.weight",
		"2.input_layernorm.weight",
		"10.experts.down_proj", "10.experts.gate_up_proj",
		"11.experts.down_proj", "11.experts.gate_up_proj",
		"12.experts.down_proj", "12.experts.gate_up_proj",
		"2.experts.down_proj",
	}
	if !slices.Equal(names, want) {
		t.Errorf("order\n got %v\nwant %v", names, want)
	}
}

func TestMakePlanExactLayout(t *testing.T) {
	tensors := []Tensor{
		{"model.decoder.layers.0.experts.down_proj", codecs.BF16, []int64{2, 4, 32}},
		{"model.decoder.norm.weight", codecs.BF16, []int64{3}},            // 6 bytes
		{"model.decoder.embed_tokens.weight", codecs.BF16, []int64{5, 7}}, // 70 bytes
		{"model.decoder.layers.0.experts.gate_up_proj", codecs.BF16, []int64{2, 8, 32}},
	}
	plan, err := MakePlan(mustPolicy(t, "bf16"), tensors)
	if err != nil {
		t.Fatal(err)
	}
	type pos struct {
		name      string
		off, size int64
	}
	var got []pos
	for _, e := range plan.Entries {
		got = append(got, pos{e.Name, e.Offset, e.Size})
	}
	want := []pos{
		{"model.decoder.embed_tokens.weight", 0, 70},
		{"model.decoder.norm.weight", 128, 6},
		{"model.decoder.layers.0.experts.down_proj", 16384, 512},
		{"model.decoder.layers.0.experts.gate_up_proj", 16896, 1024},
	}
	if !reflect.DeepEqual(got, want) || !plan.HasExperts || plan.ExpertSplit != 16384 || plan.BlobSize != 17920 {
		t.Errorf("layout %v split %d size %d", got, plan.ExpertSplit, plan.BlobSize)
	}

	// Without experts there is no split and the blob ends at the last tensor
	// (as the engine writes it); with only experts the tail starts at 0.
	plan, err = MakePlan(mustPolicy(t, "q4"), tensors[1:3])
	if err != nil || plan.HasExperts || plan.ExpertSplit != 0 || plan.BlobSize != 134 {
		t.Errorf("no experts: %v %+v", err, plan)
	}
	plan, err = MakePlan(mustPolicy(t, "q4"), []Tensor{tensors[0], tensors[3]})
	if err != nil || !plan.HasExperts || plan.ExpertSplit != 0 || plan.Entries[0].Offset != 0 || plan.Entries[1].Offset%64 != 0 {
		t.Errorf("only experts: %v %+v", err, plan)
	}
}

func joined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func TestMakePlanRefusals(t *testing.T) {
	tensors := append(tinyTensors(t),
		Tensor{"model.decoder.layers.6.experts.down_proj", codecs.BF16, []int64{8, 64, 33}},
		Tensor{"model.decoder.layers.6.experts.gate_up_proj", codecs.BF16, []int64{8, 66, 64}},
		Tensor{"model.decoder.layers.6.self_attn.o_proj.weight", codecs.BF16, []int64{64, 40}},
		Tensor{"model.decoder.layers.6.mlp.down_proj.weight", codecs.BF16, []int64{64, 48}},
	)
	_, err := MakePlan(mustPolicy(t, "q4", "attn=nvfp4", "dense=q6"), tensors)
	if !errors.Is(err, ErrDims) || !errors.Is(err, codecs.ErrDims) {
		t.Fatalf("want ErrDims, got %v", err)
	}
	errs := joined(err)
	if len(errs) != 3 {
		t.Fatalf("%d refusals, want 3: %v", len(errs), err)
	}
	want := []struct{ name, shape, rule, fix string }{
		{"model.decoder.layers.6.experts.down_proj", "[8 64 33]", "q4 needs the last dimension (33) to be a multiple of 32", "use --set experts=q8"},
		{"model.decoder.layers.6.mlp.down_proj.weight", "[64 48]", "q6 needs the last dimension (48) to be a multiple of 32", "use --set dense=q8"},
		{"model.decoder.layers.6.self_attn.o_proj.weight", "[64 40]", "nvfp4 needs the last dimension (40) to be a multiple of 16", "use --set attn=q8"},
	}
	for i, w := range want {
		var te *TensorError
		if !errors.As(errs[i], &te) || te.Name != w.name {
			t.Fatalf("refusal %d = %v, want %s", i, errs[i], w.name)
		}
		msg := errs[i].Error()
		for _, s := range []string{"layout: ", w.name, "shape " + w.shape, w.rule, w.fix} {
			if !strings.Contains(msg, s) {
				t.Errorf("refusal %q lacks %q", msg, s)
			}
		}
	}
	// q4 on K = 48 suggests nvfp4 first (same bit width), then lists what fits.
	_, err = MakePlan(mustPolicy(t, "q4", "dense=q4"), tensors[len(tensors)-1:])
	if err == nil || !strings.Contains(err.Error(), "use --set dense=nvfp4 (formats that fit this shape: raw, q8, nvfp4)") {
		t.Errorf("q4 on K=48: %v", err)
	}
	// With role overrides, the fix names the tensor's role.
	_, err = MakePlan(mustPolicy(t, "q4", "experts.gate_up=q5", "experts.down=q5"), tensors[len(tensors)-4:len(tensors)-3])
	if err == nil || !strings.Contains(err.Error(), "use --set experts.down=q8 (") {
		t.Errorf("role fix: %v", err)
	}
}

func TestMakePlanOtherRefusals(t *testing.T) {
	bad := []Tensor{
		{"model.decoder.norm.weight", codecs.BF16, []int64{64}},
		{"model.decoder.norm.weight", codecs.BF16, []int64{64}},
		{"model.decoder.bogus.weight", codecs.BF16, []int64{64}},
		{"model.decoder.layers.0.self_attn.q_proj.weight", codecs.DTypeInvalid, []int64{8, 64}},
		{"model.decoder.layers.0.self_attn.k_proj.weight", codecs.BF16, []int64{-1, 64}},
		{"model.decoder.layers.0.self_attn.v_proj.weight", codecs.BF16, []int64{64}},
		{"model.decoder.layers.0.self_attn.o_proj.weight", codecs.BF16, []int64{64, 64}},
	}
	_, err := MakePlan(mustPolicy(t, "q4", "attn=q8"), bad)
	for _, target := range []error{ErrDuplicate, ErrUnknownTensor, codecs.ErrUnknownDType, codecs.ErrShape, ErrDims} {
		if !errors.Is(err, target) {
			t.Errorf("want %v in %v", target, err)
		}
	}
	if n := len(joined(err)); n != 5 {
		t.Errorf("%d refusals, want 5: %v", n, err)
	}
	if !strings.Contains(err.Error(), "q8 needs rank >= 2") || !strings.Contains(err.Error(), "use --set attn=raw") {
		t.Errorf("q8 rank refusal missing: %v", err)
	}
	for _, e := range joined(err) {
		if !strings.HasPrefix(e.Error(), "layout: ") {
			t.Errorf("unprefixed: %v", e)
		}
	}
	// The error list is independent of input order too.
	rev := slices.Clone(bad)
	slices.Reverse(rev)
	_, err2 := MakePlan(mustPolicy(t, "q4", "attn=q8"), rev)
	if err2 == nil || err.Error() != err2.Error() {
		t.Errorf("refusals depend on order:\n%v\n%v", err, err2)
	}

	if _, err := MakePlan(mustPolicy(t, "q4"), nil); !errors.Is(err, ErrInventory) {
		t.Errorf("empty: %v", err)
	}
	if _, err := MakePlan(Policy{Profile: "q4", Overrides: []Override{{"router", codecs.Q8}}}, bad[:1]); !errors.Is(err, ErrLocked) {
		t.Errorf("unvalidated policy: %v", err)
	}
}

func TestNaturalCompare(t *testing.T) {
	ordered := []string{
		"", "a", "a.b", "a0", "a01", "a1", "a2", "a10", "a10.b", "a10b", "a100",
		"layers.2.x", "layers.10.x", "layers.99999999999999999999999.x", "layers.100000000000000000000000.x", "lb",
	}
	for i := range ordered {
		for j := range ordered {
			got := NaturalCompare(ordered[i], ordered[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got != want {
				t.Errorf("NaturalCompare(%q, %q) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
}
