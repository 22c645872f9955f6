package model

import (
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/internal/fixture"
)

func TestMain(m *testing.M) { fixture.Main(m) }

// fakeWeights serves a filtered or edited copy of a real pack's tensors.
type fakeWeights struct {
	tensors []backend.TensorData
	files   func(string) ([]byte, error)
}

func (f *fakeWeights) Tensors() []backend.TensorData        { return f.tensors }
func (f *fakeWeights) ReadFile(name string) ([]byte, error) { return f.files(name) }

func openPack(t *testing.T, fx, profile string) Weights {
	t.Helper()
	return PackWeights(fixture.OpenPack(t, fx, profile))
}

func TestBindReportsEveryProblemAtOnce(t *testing.T) {
	w := openPack(t, "tiny", "bf16")
	drop := []string{
		"model.decoder.layers.0.self_attn.q_proj.weight",
		"model.decoder.layers.3.experts.down_proj",
		"model.encoder.language_model.layers.5.layer_scalar",
		"model.decoder.self_conditioning.pre_norm.weight",
	}
	var ts []backend.TensorData
	for _, td := range w.Tensors() {
		switch {
		case slices.Contains(drop, td.Name):
			continue
		case td.Name == "model.decoder.layers.1.mlp.up_proj.weight":
			td.Shape = []int64{td.Shape[0], td.Shape[1] + 1}
		case td.Name == "model.decoder.layers.2.router.scale":
			td.Bytes = td.Bytes[:len(td.Bytes)-2]
		}
		ts = append(ts, td)
	}
	extra := ts[0]
	extra.Name = "model.decoder.layers.0.self_attn.v_proj.bias"
	ts = append(ts, extra)
	extra.Name = "model.decoder.mystery.weight"
	ts = append(ts, extra, ts[1]) // ts[1] again: a duplicate
	_, err := Bind(&fakeWeights{tensors: ts, files: w.ReadFile})
	if !errors.Is(err, ErrBinding) {
		t.Fatalf("Bind: %v, want ErrBinding", err)
	}
	var be *BindError
	if !errors.As(err, &be) {
		t.Fatalf("error %T is not a *BindError", err)
	}
	for _, n := range drop {
		if !slices.Contains(be.Missing, n) {
			t.Errorf("missing %s not reported", n)
		}
	}
	if len(be.Missing) != len(drop) {
		t.Errorf("missing = %v", be.Missing)
	}
	if want := []string{"model.decoder.layers.0.self_attn.v_proj.bias", "model.decoder.mystery.weight"}; !slices.Equal(be.Unexpected, want) {
		t.Errorf("unexpected = %v, want %v", be.Unexpected, want)
	}
	if len(be.Duplicate) != 1 || be.Duplicate[0] != ts[1].Name {
		t.Errorf("duplicate = %v", be.Duplicate)
	}
	if len(be.Mismatched) != 1 || be.Mismatched[0].Name != "model.decoder.layers.1.mlp.up_proj.weight" {
		t.Errorf("mismatched = %v", be.Mismatched)
	}
	if len(be.Invalid) != 1 || !strings.HasPrefix(be.Invalid[0], "model.decoder.layers.2.router.scale") {
		t.Errorf("invalid = %v", be.Invalid)
	}
	msg := err.Error()
	for _, s := range []string{"missing model.decoder.layers.3.experts.down_proj", "unexpected model.decoder.mystery.weight", "shape model.decoder.layers.1.mlp.up_proj.weight"} {
		if !strings.Contains(msg, s) {
			t.Errorf("message lacks %q:\n%s", s, msg)
		}
	}
	if be.Count() != 9 {
		t.Errorf("Count = %d, want 9:\n%s", be.Count(), msg)
	}
}

// Vision tensors are ignored: a pack without them binds, and tied copies of
// decoder weights under the encoder prefix are accepted.
func TestBindIgnoresVisionAcceptsTiedCopies(t *testing.T) {
	w := openPack(t, "tiny", "bf16")
	var ts []backend.TensorData
	vision := 0
	for _, td := range w.Tensors() {
		if strings.HasPrefix(td.Name, "model.encoder.vision_tower.") || strings.HasPrefix(td.Name, "model.encoder.embed_vision.") {
			vision++
			continue
		}
		ts = append(ts, td)
		if td.Name == "model.decoder.layers.0.self_attn.q_proj.weight" {
			cp := td
			cp.Name = "model.encoder.language_model.layers.0.self_attn.q_proj.weight"
			ts = append(ts, cp)
		}
	}
	if vision == 0 {
		t.Fatal("the pack has no vision tensors")
	}
	if _, err := Bind(&fakeWeights{tensors: ts, files: w.ReadFile}); err != nil {
		t.Fatal(err)
	}
}

func TestBindConfigErrors(t *testing.T) {
	w := openPack(t, "tiny", "bf16")
	noFile := func(string) ([]byte, error) { return nil, fs.ErrNotExist }
	if _, err := Bind(&fakeWeights{tensors: w.Tensors(), files: noFile}); !errors.Is(err, ErrBinding) {
		t.Errorf("no config.json: %v", err)
	}
	cfg, err := w.ReadFile("config.json")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(cfg), `"gelu_pytorch_tanh"`, `"silu"`, 1)
	if _, err := Bind(&fakeWeights{tensors: w.Tensors(), files: func(string) ([]byte, error) { return []byte(bad), nil }}); !errors.Is(err, ErrBinding) {
		t.Errorf("silu config: %v", err)
	}
	if _, err := w.ReadFile("../config.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile outside the pack: %v", err)
	}
	if _, err := w.ReadFile("model.dgq.bin"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile of an unlisted file: %v", err)
	}
}
