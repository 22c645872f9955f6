package metal

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/dgq/testmodel"
	"github.com/dgq-dev/dgq/runtime/model"
)

// TinyPack is tinyPack for the device tests of package metal_test
// (backend_darwin_test.go).
func TinyPack(t *testing.T, profile string) (*model.Model, string) { return tinyPack(t, profile) }

// tinyPack quantizes the embedded tiny checkpoint with a profile, binds it
// and returns the model and the directory of its transformers reference.
func tinyPack(t *testing.T, profile string) (*model.Model, string) {
	t.Helper()
	tmp := t.TempDir()
	src, ref, out := filepath.Join(tmp, "snap"), filepath.Join(tmp, "ref"), filepath.Join(tmp, "pack")
	if _, err := testmodel.WriteSnapshot(src); err != nil {
		t.Fatal(err)
	}
	if err := testmodel.WriteReference(ref); err != nil {
		t.Fatal(err)
	}
	if _, err := dgq.Quantize(context.Background(), dgq.QuantizeOptions{Source: src, Out: out, Profile: profile}); err != nil {
		t.Fatal(err)
	}
	pk, err := dgq.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pk.Close() })
	m, err := model.Bind(model.PackWeights(pk))
	if err != nil {
		t.Fatal(err)
	}
	return m, ref
}
