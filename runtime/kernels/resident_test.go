package kernels

import (
	"testing"

	"github.com/dgq-dev/dgq/codecs"
)

// TestResidentLayout: each format's planes, their alignment and sizes, and
// dgq_decode's format code.
func TestResidentLayout(t *testing.T) {
	m := codecs.Matrix{Rows: 3, K: 64}
	cases := []struct {
		f          codecs.Format
		dt         codecs.DType
		code, bits uint32
		rows       [3]int64 // bytes per row of each plane
		size       int64
	}{
		{codecs.Raw, codecs.F32, FmtF32, 0, [3]int64{256}, 3 * 256},
		{codecs.Raw, codecs.BF16, FmtBF16, 0, [3]int64{128}, 3 * 128},
		{codecs.Raw, codecs.F16, FmtF16, 0, [3]int64{128}, 3 * 128},
		{codecs.Q8, codecs.BF16, FmtQ8, 0, [3]int64{64, 4}, 192 + 12},
		{codecs.Q4, codecs.BF16, FmtAffine, 4, [3]int64{32, 4, 4}, 128 + 64 + 12},
		{codecs.Q5, codecs.BF16, FmtAffine, 5, [3]int64{40, 4, 4}, 128 + 64 + 12},
		{codecs.Q6, codecs.BF16, FmtAffine, 6, [3]int64{48, 4, 4}, 192 + 64 + 12},
		{codecs.NVFP4, codecs.BF16, FmtNVFP4, 0, [3]int64{32, 4, 0}, 128 + 64 + 4},
	}
	for _, c := range cases {
		t.Run(c.f.String()+"-"+c.dt.String(), func(t *testing.T) {
			p, err := ResidentLayout(c.f, c.dt, m)
			if err != nil {
				t.Fatal(err)
			}
			if p.Code != c.code || p.Bits != c.bits || p.Row != c.rows || p.Size != c.size || p.MatRows < 1 {
				t.Errorf("layout %+v, want code %d bits %d rows %v size %d", p, c.code, c.bits, c.rows, c.size)
			}
			end := int64(0)
			for i := range 3 {
				if p.Row[i] == 0 && !(c.f == codecs.NVFP4 && i == 2) {
					continue
				}
				if p.Off[i]%PlaneAlign != 0 || p.Off[i] < end {
					t.Errorf("plane %d at %d (previous ends at %d)", i, p.Off[i], end)
				}
				end = p.Off[i] + m.Rows*p.Row[i]
				if p.PlaneAt(i, 2) != p.Off[i]+2*p.Row[i] {
					t.Errorf("plane %d at row 2: %d", i, p.PlaneAt(i, 2))
				}
			}
		})
	}
	if _, err := ResidentLayout(codecs.Q4, codecs.BF16, codecs.Matrix{Rows: 2, K: 33}); err == nil {
		t.Error("q4 with K = 33 has a layout")
	}
	if _, err := ResidentLayout(codecs.Format(200), codecs.BF16, m); err == nil {
		t.Error("an unknown format has a layout")
	}
}
