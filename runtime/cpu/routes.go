package cpu

import "github.com/dgq-dev/dgq/runtime/backend"

// RecordRoutes makes every later MoE call append its top-k selection to r
// (backend.RouteRecorder; each row's ids in descending router probability,
// ties to the lower index) with each row's selection margin: its K-th
// expert probability minus the best one left out (a near tie when small:
// another backend's rounding may choose the other expert). nil stops
// recording. It is an optional output of MoE for diagnostics and changes
// no result.
// Prefill calls MoE too (the encoder's layers): record around the calls to
// measure only.
func (c *Backend) RecordRoutes(r *backend.Routes) { c.routes = r }

// recordRoutes appends one MoE call's selection (idx: rows×k expert ids)
// and margins to the Routes RecordRoutes set, if any.
func (c *Backend) recordRoutes(idx []int, rows, k int, margins []float64) {
	if c.routes != nil {
		c.routes.Append(rows, k, idx, margins)
	}
}
