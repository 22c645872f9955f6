package dgq

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
)

// convertSnapshot rewrites the tiny checkpoint with every tensor in dt.
func convertSnapshot(t *testing.T, dt codecs.DType) string {
	t.Helper()
	src := tinySnapshot(t)
	tensors := readTensors(t, src)
	for i := range tensors {
		n := len(tensors[i].data) / 2
		f := make([]float32, n)
		if err := codecs.ToFloat32(codecs.BF16, tensors[i].data, f); err != nil {
			t.Fatal(err)
		}
		out := make([]byte, n*dt.Size())
		for j, v := range f {
			switch dt {
			case codecs.F32:
				binary.LittleEndian.PutUint32(out[4*j:], math.Float32bits(v))
			case codecs.F16:
				binary.LittleEndian.PutUint16(out[2*j:], codecs.Float32ToF16(v))
			}
		}
		tensors[i].dtype, tensors[i].data = dt, out
	}
	dst := filepath.Join(t.TempDir(), dt.String())
	writeShards(t, dst, tensors, 2, func(i int) int { return i % 2 })
	copySide(t, src, dst)
	return dst
}

// F16 and F32 checkpoints quantize in every profile and audit clean; raw
// tensors keep the source dtype and bytes.
func TestQuantizeF16AndF32Sources(t *testing.T) {
	for _, dt := range []codecs.DType{codecs.F16, codecs.F32} {
		src := convertSnapshot(t, dt)
		for _, profile := range allProfiles {
			out, _ := quantize(t, src, profile)
			rep, err := Audit(context.Background(), out, AuditOptions{})
			if err != nil || !rep.OK {
				t.Fatalf("%s %s: audit %v %v", dt, profile, err, rep.Findings)
			}
			p, err := Open(out)
			if err != nil {
				t.Fatal(err)
			}
			refs := readTensors(t, src)
			for _, r := range refs {
				tn, _ := p.Tensor(r.name)
				if tn.DType != dt {
					t.Fatalf("%s: dtype %s, source %s", r.name, tn.DType, dt)
				}
				if tn.Format == codecs.Raw {
					b, _ := p.TensorBytes(r.name)
					if !bytes.Equal(b, r.data) {
						t.Fatalf("%s %s: raw %s differs from the source", dt, profile, r.name)
					}
				}
			}
			p.Close()
		}
	}
}
