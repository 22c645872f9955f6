package check

import (
	"context"
	"math"
	"reflect"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/layout"
	"github.com/dgq-dev/dgq/runtime/internal/fixture"
)

// --sensitivity on a q4 pack: one entry per quantized class in layout's
// order, then one per expert layer ascending; every KLD finite and ≥ 0, a
// step cost with generations; the same seed gives the same numbers.
func TestVerifySensitivity(t *testing.T) {
	pack := fixture.PackDir(t, "tiny", "q4")
	src := fixture.PackDir(t, "tiny", "bf16")
	m, err := dgq.ReadManifest(pack)
	if err != nil {
		t.Fatal(err)
	}
	quantized := map[layout.Class]bool{}
	layers := map[int]bool{}
	for _, tn := range m.Tensors {
		if tn.Format != codecs.Raw {
			c := tensorClass(tn)
			quantized[c] = true
			if c == layout.Experts {
				layers[tensorLayer(tn.Name)] = true
			}
		}
	}
	if !quantized[layout.Experts] || len(layers) == 0 {
		t.Fatalf("the q4 fixture quantizes no experts: %v", quantized)
	}
	var want []VerifySensitivity
	for _, c := range layout.Classes() {
		if quantized[c] {
			want = append(want, VerifySensitivity{Class: c.String()})
		}
	}
	for l := 0; len(want) < len(quantized)+len(layers); l++ {
		if layers[l] {
			want = append(want, VerifySensitivity{Class: "experts", Layer: &l})
		}
	}
	o := quickVerify(VerifyOptions{Source: src, Sensitivity: true})
	r, err := Verify(context.Background(), pack, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Sensitivity) != len(want) {
		t.Fatalf("%d entries, want %d: %+v", len(r.Sensitivity), len(want), r.Sensitivity)
	}
	for i, e := range r.Sensitivity {
		w := want[i]
		if e.Class != w.Class || (e.Layer == nil) != (w.Layer == nil) || (e.Layer != nil && *e.Layer != *w.Layer) {
			t.Errorf("entry %d: %s layer %v, want %s layer %v", i, e.Class, e.Layer, w.Class, w.Layer)
		}
		if math.IsNaN(e.KLDMean) || math.IsInf(e.KLDMean, 0) || e.KLDMean < 0 {
			t.Errorf("entry %d (%s): kld_mean %g", i, e.Class, e.KLDMean)
		}
		if e.StepCost != nil && (math.IsNaN(*e.StepCost) || *e.StepCost <= 0) {
			t.Errorf("entry %d (%s): step_cost %g", i, e.Class, *e.StepCost)
		}
		layer := -1
		if e.Layer != nil {
			layer = *e.Layer
		}
		cost := math.NaN()
		if e.StepCost != nil {
			cost = *e.StepCost
		}
		t.Logf("%s layer %d: kld %.4g step cost %.3f", e.Class, layer, e.KLDMean, cost)
	}
	again, err := Verify(context.Background(), pack, o)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Sensitivity, again.Sensitivity) {
		t.Errorf("not deterministic:\n%+v\n%+v", r.Sensitivity, again.Sensitivity)
	}
	// Without generations there is no step cost.
	o.Generations = -1
	r, err = Verify(context.Background(), pack, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Sensitivity) != len(want) {
		t.Fatalf("--generations 0: %d entries, want %d", len(r.Sensitivity), len(want))
	}
	for i, e := range r.Sensitivity {
		if e.StepCost != nil {
			t.Errorf("--generations 0: entry %d step_cost %g", i, *e.StepCost)
		}
	}
}

// Without Sensitivity the report has none (null); a bf16 pack against its
// own source quantizes nothing: an empty list.
func TestVerifySensitivityNone(t *testing.T) {
	pack := fixture.PackDir(t, "tiny", "bf16")
	r := verifyOK(t, pack, VerifyOptions{Source: pack})
	if r.Sensitivity != nil {
		t.Errorf("sensitivity without the option: %+v", r.Sensitivity)
	}
	r = verifyOK(t, pack, VerifyOptions{Source: pack, Sensitivity: true})
	if r.Sensitivity == nil || len(r.Sensitivity) != 0 {
		t.Errorf("bf16 pack: sensitivity %+v, want empty", r.Sensitivity)
	}
}
