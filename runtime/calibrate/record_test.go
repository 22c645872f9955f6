package calibrate

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/cpu"
)

// The host's intermediate activations (the down projection's input) are
// the cpu backend's: each routed expert's gate and up rows through
// MatMulNT, then GeluMul, squared and summed per column.
func TestCalibrateDownIntermediate(t *testing.T) {
	const E, F, H, rows, K = 3, 4, 6, 5, 2
	rng := rand.New(rand.NewPCG(1, 2))
	bank := make([]byte, 2*E*2*F*H)
	for i := 0; i < E*2*F*H; i++ {
		binary.LittleEndian.PutUint16(bank[2*i:], codecs.Float32ToBF16(float32(rng.NormFloat64())))
	}
	td := backend.TensorData{Name: "bank", Format: codecs.Raw, DType: codecs.BF16, Shape: []int64{E, 2 * F, H}, Bytes: bank}
	u := make([]float32, rows*H)
	for i := range u {
		u[i] = float32(rng.NormFloat64())
	}
	call := backend.RouteCall{Rows: rows, K: K, Experts: []int{0, 2, 2, 0, 0, 2, 2, 0, 0, 2}} // expert 1 unreached
	be := cpu.New(1)
	r := newRecorder(be, func(string) bool { return true })
	got := newStat("down", E, F)
	if err := r.down(got, td, call, u, H); err != nil {
		t.Fatal(err)
	}
	host := newStat("down", E, F)
	if err := hostDown(host, td, call, u, H); err != nil {
		t.Fatal(err)
	}
	want := newStat("down", E, F)
	for t0 := range rows {
		for _, e := range call.Row(t0) {
			slab := td
			slab.Shape = []int64{2 * F, H}
			slab.Bytes = bank[e*2*F*H*2 : (e+1)*2*F*H*2]
			w, err := be.UploadWeight(slab)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := be.Alloc(H)
			c, _ := be.Alloc(2 * F)
			g, _ := be.Alloc(F)
			up, _ := be.Alloc(F)
			be.Upload(a, u[t0*H:(t0+1)*H])
			be.MatMulNT(c, a, w, 1)
			be.Copy(g, 0, c, 0, F)
			be.Copy(up, 0, c, F, F)
			be.GeluMul(g, up, F)
			mid := make([]float32, F)
			if err := be.Download(g, mid); err != nil {
				t.Fatal(err)
			}
			want.add(e, mid)
		}
	}
	for i := range want.sum2 {
		if d := math.Abs(got.sum2[i] - want.sum2[i]); d > 1e-5*(1+math.Abs(want.sum2[i])) {
			t.Errorf("in_sum2[%d] = %g, the cpu backend's %g", i, got.sum2[i], want.sum2[i])
		}
	}
	for i := range want.sum2 { // the host's float64 sums agree within f32 rounding
		if d := math.Abs(host.sum2[i] - want.sum2[i]); d > 1e-5*(1+math.Abs(want.sum2[i])) {
			t.Errorf("host in_sum2[%d] = %g, the cpu backend's %g", i, host.sum2[i], want.sum2[i])
		}
	}
	for e := range E {
		if got.counts[e] != want.counts[e] || host.counts[e] != want.counts[e] {
			t.Errorf("counts[%d] = %g, want %g", e, got.counts[e], want.counts[e])
		}
	}
	if got.counts[1] != 0 || got.counts[0] != 5 || got.counts[2] != 5 {
		t.Errorf("counts %v", got.counts)
	}
}

// hostDown accumulates the down projection's input: for each expert e reached
// and each row t routed to it, gelu(gate_e·u[t])⊙(up_e·u[t]), computed on
// the host from the gate_up bank's bytes (MODEL_SPEC §3.5: the f32 tanh
// GELU, the f32 product; the dot products summed in float64 and rounded to
// f32, as the cpu reference's tolerance allows).
func hostDown(s *stat, bank backend.TensorData, call backend.RouteCall, hu []float32, H int) error {
	g, err := bank.Matrix()
	if err != nil {
		return err
	}
	E := s.experts
	F := s.in
	if g.Rows != int64(E*2*F) || g.K != int64(H) {
		return fmt.Errorf("calibrate: %s is %d×%d, want %d×%d", bank.Name, g.Rows, g.K, E*2*F, H)
	}
	byExpert := make([][]int, E)
	for t := range call.Rows {
		for _, e := range call.Row(t) {
			byExpert[e] = append(byExpert[e], t)
		}
	}
	slab := make([]float32, 2*F*H)
	mid := make([]float32, F)
	for e, ts := range byExpert {
		if len(ts) == 0 {
			continue
		}
		if err := codecs.DecodeRows(bank.Format, bank.DType, g, bank.Bytes, int64(e*2*F), int64(2*F), slab); err != nil {
			return err
		}
		for _, t := range ts {
			x := hu[t*H : (t+1)*H]
			for j := range F {
				gate := dot(slab[j*H:(j+1)*H], x)
				up := dot(slab[(F+j)*H:(F+j+1)*H], x)
				mid[j] = gelu(gate) * up
			}
			s.add(e, mid)
		}
	}
	return nil
}

func dot(a, b []float32) float32 {
	var s float64
	for i, v := range a {
		s += float64(v) * float64(b[i])
	}
	return float32(s)
}

// gelu is PyTorch's tanh GELU rounded to f32 (MODEL_SPEC §3.1.2).
func gelu(x float32) float32 {
	v := float64(x)
	return float32(0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v))))
}

// A layer with an expert no row reached is named in the warning, its
// coverage says how many were reached and the smallest count is 0.
func TestCalibrateCoverageWarning(t *testing.T) {
	a := newStat("model.decoder.layers.0.experts.gate_up_proj", 4, 2)
	b := newStat("model.decoder.layers.1.experts.gate_up_proj", 4, 2)
	for e := range 4 {
		b.add(e, []float32{1, 2})
		if e != 2 {
			a.add(e, []float32{1, 2})
		}
	}
	cov, warn := coverage([]*stat{a, b, newStat("model.decoder.layers.0.self_attn.q_proj.weight", 1, 2)})
	want := []Coverage{{Layer: 0, ExpertsReached: 3, Experts: 4, MinCount: 0}, {Layer: 1, ExpertsReached: 4, Experts: 4, MinCount: 1}}
	if fmt.Sprint(cov) != fmt.Sprint(want) {
		t.Errorf("coverage %v, want %v", cov, want)
	}
	if len(warn) != 1 || !strings.Contains(warn[0], "layers 0 (3 of 4)") {
		t.Errorf("warnings %q", warn)
	}
}
