package cpu

import "slices"

// Routes receives the experts the router selects (RecordRoutes): one
// RouteCall per MoE call, in call order. Through the Engine's denoising
// forward that is layer order, one call per decoder layer.
type Routes struct {
	Calls []RouteCall
}

// RouteCall is one MoE call's selection: Experts holds Rows×K expert ids,
// row by row, each row's K ids in top-k slot order (descending router
// probability, ties to the lower index).
type RouteCall struct {
	Rows, K int
	Experts []int
}

// Row returns row t's expert ids.
func (c RouteCall) Row(t int) []int { return c.Experts[t*c.K : (t+1)*c.K] }

// RecordRoutes makes every later MoE call append its top-k selection to r
// (a copy of the expert ids of each row); nil stops recording. Like
// RecordRouterMargins it is an optional output of MoE for diagnostics (dgq
// verify compares two packs' routing layer by layer); it changes no result.
// Prefill calls MoE too (the encoder's layers): record around the calls to
// measure only.
func (c *Backend) RecordRoutes(r *Routes) { c.routes = r }

// recordRoutes appends one MoE call's selection (idx: rows×k expert ids)
// to the Routes RecordRoutes set, if any.
func (c *Backend) recordRoutes(idx []int, rows, k int) {
	if c.routes == nil {
		return
	}
	c.routes.Calls = append(c.routes.Calls, RouteCall{Rows: rows, K: k, Experts: slices.Clone(idx[:rows*k])})
}
