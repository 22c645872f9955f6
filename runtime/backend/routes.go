package backend

import "slices"

// Routes receives the experts a backend's router selects, for diagnostics
// (RouteRecorder): one RouteCall per MoE call, in call order. Through the
// Engine's denoising forward that is layer order, one call per decoder
// layer; a prefill makes one call per encoder layer.
type Routes struct {
	Calls []RouteCall
}

// RouteCall is one MoE call's selection: Experts holds Rows×K expert ids,
// row by row, each row's K ids in top-k slot order. Margins, where the
// backend gives them (the CPU does), holds each row's selection margin:
// its K-th expert probability minus the best one left out.
type RouteCall struct {
	Rows, K int
	Experts []int
	Margins []float64
}

// Row returns row t's expert ids.
func (c RouteCall) Row(t int) []int { return c.Experts[t*c.K : (t+1)*c.K] }

// Append appends one call's selection: the first rows·k ids of experts,
// and the rows' margins when margins is not nil.
func (r *Routes) Append(rows, k int, experts []int, margins []float64) {
	c := RouteCall{Rows: rows, K: k, Experts: slices.Clone(experts[:rows*k])}
	if margins != nil {
		c.Margins = slices.Clone(margins[:rows])
	}
	r.Calls = append(r.Calls, c)
}

// SameExperts reports whether rows a and b select the same set of experts
// (slot order aside: the combine sums the slots, so only the set decides
// which experts compute a token).
func SameExperts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// RouteRecorder is implemented by backends that can report their routing
// (the cpu, cuda and metal backends): RecordRoutes makes every later MoE call
// append its top-k selection to r; nil stops recording. It is an optional
// output for diagnostics (dgq verify compares two packs' routing layer by
// layer; the lockstep finds the tokens two backends routed differently)
// and changes no result.
type RouteRecorder interface {
	RecordRoutes(r *Routes)
}
