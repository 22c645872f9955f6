package calibrate

import (
	"errors"
	"fmt"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/runtime/backend"
)

// stat is one tensor's accumulated statistic: experts rows (1 for a 2-D
// weight) of in values, sums of squares and row counts in float64 (summed
// in call order: deterministic on a deterministic backend).
type stat struct {
	name        string
	experts, in int
	sum2        []float64 // [experts·in]
	counts      []float64 // [experts]
}

func newStat(name string, experts, in int) *stat {
	return &stat{name: name, experts: experts, in: in, sum2: make([]float64, experts*in), counts: make([]float64, experts)}
}

// add accumulates one input row for expert e.
func (s *stat) add(e int, row []float32) {
	dst := s.sum2[e*s.in : (e+1)*s.in]
	for i, v := range row {
		dst[i] += float64(v) * float64(v)
	}
	s.counts[e]++
}

// recorder wraps a backend: MatMulNT and MoE accumulate their inputs into
// the stats of the quantizable weights (named at UploadWeight); every op's
// result is the wrapped backend's.
type recorder struct {
	backend.Backend
	rr        backend.RouteRecorder
	quantized func(name string) bool // whether a tensor is recorded
	names     map[backend.Weight]string
	data      map[string]backend.TensorData // the expert banks, for the host's intermediate
	stats     map[string]*stat
	on        bool
	experts   map[string][][2]backend.Weight // a gate_up bank's per-expert gate and up weights (down)
	a, g, u   backend.Buf                    // down's scratch
	host      []float32
}

func newRecorder(b backend.Backend, quantized func(string) bool) *recorder {
	rr, _ := b.(backend.RouteRecorder)
	return &recorder{Backend: b, rr: rr, quantized: quantized, names: map[backend.Weight]string{},
		data: map[string]backend.TensorData{}, stats: map[string]*stat{}, experts: map[string][][2]backend.Weight{}}
}

// UploadWeight names the weight it returns and makes its stat.
func (r *recorder) UploadWeight(t backend.TensorData) (backend.Weight, error) {
	w, err := r.Backend.UploadWeight(t)
	if err != nil || !r.quantized(t.Name) {
		return w, err
	}
	r.names[w] = t.Name
	switch len(t.Shape) {
	case 2:
		r.stats[t.Name] = newStat(t.Name, 1, int(t.Shape[1]))
	case 3:
		r.stats[t.Name] = newStat(t.Name, int(t.Shape[0]), int(t.Shape[2]))
		r.data[t.Name] = t // a slice of the mapped pack, open while the session is
	}
	return w, nil
}

// download reads the first n values of b into the recorder's host buffer.
func (r *recorder) download(b backend.Buf, n int) ([]float32, error) {
	if cap(r.host) < n {
		r.host = make([]float32, n)
	}
	h := r.host[:n]
	return h, r.Backend.Download(b, h)
}

func (r *recorder) MatMulNT(c, a backend.Buf, w backend.Weight, m int) error {
	if err := r.Backend.MatMulNT(c, a, w, m); err != nil {
		return err
	}
	name, ok := r.names[w]
	if !r.on || !ok || m <= 0 {
		return nil
	}
	s := r.stats[name]
	if s.experts != 1 {
		return nil
	}
	h, err := r.download(a, m*s.in)
	if err != nil {
		return err
	}
	for t := range m {
		s.add(0, h[t*s.in:(t+1)*s.in])
	}
	return nil
}

func (r *recorder) MoE(out, u, x backend.Buf, rows int, w backend.MoEWeights) error {
	gu, ok1 := r.names[w.GateUp]
	dn, ok2 := r.names[w.Down]
	if !r.on || (!ok1 && !ok2) || rows <= 0 {
		return r.Backend.MoE(out, u, x, rows, w)
	}
	if r.rr == nil {
		return fmt.Errorf("calibrate: the %s backend does not report its routes", r.Backend.Name())
	}
	var routes backend.Routes
	r.rr.RecordRoutes(&routes)
	err := r.Backend.MoE(out, u, x, rows, w)
	r.rr.RecordRoutes(nil)
	if err != nil {
		return err
	}
	if len(routes.Calls) != 1 || routes.Calls[0].Rows != rows {
		return fmt.Errorf("calibrate: the %s backend reported %d route calls for one MoE call", r.Backend.Name(), len(routes.Calls))
	}
	call := routes.Calls[0]
	H := w.GateUp.Cols()
	hu, err := r.download(u, rows*H)
	if err != nil {
		return err
	}
	hu = append([]float32(nil), hu...)
	if ok1 {
		s := r.stats[gu]
		for t := range rows {
			for _, e := range call.Row(t) {
				s.add(e, hu[t*H:(t+1)*H])
			}
		}
	}
	if ok2 && ok1 {
		if err := r.down(r.stats[dn], r.data[gu], call, hu, H); err != nil {
			return err
		}
	}
	return nil
}

// down accumulates the down projection's input: for each expert e reached
// and the rows routed to it, gelu(gate_e·u)⊙(up_e·u), computed on the
// wrapped backend with its own ops (MatMulNT on the expert's gate and up
// rows of the bank, uploaded once as two [F, H] weights, then GeluMul):
// the MoE op's arithmetic, which the fused op never exposes. On the cpu
// backend those weights read the mapped pack in place; on a GPU backend
// they are a second copy of the gate_up banks.
func (r *recorder) down(s *stat, bank backend.TensorData, call backend.RouteCall, hu []float32, H int) error {
	E, F := s.experts, s.in
	if bank.Format != codecs.Raw || len(bank.Bytes)%(E*2*F) != 0 {
		return fmt.Errorf("calibrate: %s is not a raw bank of %d×%d rows", bank.Name, E, 2*F)
	}
	rowBytes := len(bank.Bytes) / (E * 2 * F)
	ws := r.experts[bank.Name]
	if ws == nil {
		ws = make([][2]backend.Weight, E)
		r.experts[bank.Name] = ws
	}
	byExpert := make([][]int, E)
	for t := range call.Rows {
		for _, e := range call.Row(t) {
			byExpert[e] = append(byExpert[e], t)
		}
	}
	for e, ts := range byExpert {
		if len(ts) == 0 {
			continue
		}
		for j := range 2 {
			if ws[e][j] != nil {
				continue
			}
			r0 := e*2*F + j*F
			w, err := r.Backend.UploadWeight(backend.TensorData{Name: fmt.Sprintf("%s[%d].%s", bank.Name, e, [2]string{"gate", "up"}[j]),
				Format: bank.Format, DType: bank.DType, Shape: []int64{int64(F), int64(H)}, Bytes: bank.Bytes[r0*rowBytes : (r0+F)*rowBytes]})
			if err != nil {
				return err
			}
			ws[e][j] = w
		}
		n := len(ts)
		a := make([]float32, 0, n*H)
		for _, t := range ts {
			a = append(a, hu[t*H:(t+1)*H]...)
		}
		if err := r.scratch(n*H, n*F); err != nil {
			return err
		}
		if err := r.Backend.Upload(r.a, a); err != nil {
			return err
		}
		if err := r.Backend.MatMulNT(r.g, r.a, ws[e][0], n); err != nil {
			return err
		}
		if err := r.Backend.MatMulNT(r.u, r.a, ws[e][1], n); err != nil {
			return err
		}
		if err := r.Backend.GeluMul(r.g, r.u, n*F); err != nil {
			return err
		}
		mid := make([]float32, n*F)
		if err := r.Backend.Download(r.g, mid); err != nil {
			return err
		}
		for i := range n {
			s.add(e, mid[i*F:(i+1)*F])
		}
	}
	return nil
}

// scratch makes the device buffers of down hold at least na (inputs) and
// nf (gate, up) values.
func (r *recorder) scratch(na, nf int) error {
	grow := func(b *backend.Buf, n int) error {
		if *b != nil && (*b).Len() >= n {
			return nil
		}
		if *b != nil {
			(*b).Free()
		}
		nb, err := r.Backend.Alloc(max(n, 1))
		*b = nb
		return err
	}
	return errors.Join(grow(&r.a, na), grow(&r.g, nf), grow(&r.u, nf))
}

// Close frees the recorder's own weights and buffers, then closes the
// wrapped backend.
func (r *recorder) Close() error {
	for _, ws := range r.experts {
		for _, w := range ws {
			for _, x := range w {
				if x != nil {
					x.Free()
				}
			}
		}
	}
	for _, b := range []backend.Buf{r.a, r.g, r.u} {
		if b != nil {
			b.Free()
		}
	}
	return r.Backend.Close()
}
