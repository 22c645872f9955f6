package check

import (
	"testing"

	"github.com/dgq-dev/dgq/dgq/testmodel"
)

// FuzzParityReference feeds damaged reference.json / reference.safetensors
// contents to Parity: errors are fine, panics are not.
func FuzzParityReference(f *testing.F) {
	e := loadEngine(f, "tiny", "bf16")
	meta, _ := testmodel.ReadReference("reference.json")
	ref, _ := testmodel.ReadReference("reference.safetensors")
	f.Add(meta, ref)
	f.Add([]byte(`{"prompt_len": 3, "canvas_length": 2, "temperature_step1": 0}`), ref)
	f.Add([]byte(`{"prompt_len": -1, "canvas_length": 1000000000}`), ref[:4096])
	f.Add(meta, []byte{8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '})
	f.Fuzz(func(t *testing.T, metaRaw, refRaw []byte) {
		_, _ = parityOn(t.Context(), e, metaRaw, refRaw, DefaultBounds())
	})
}
