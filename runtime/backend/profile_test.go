package backend_test

import (
	"slices"
	"testing"

	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/cpu"
	"github.com/dgq-dev/dgq/runtime/internal/fixture"
	"github.com/dgq-dev/dgq/runtime/model"
)

func TestMain(m *testing.M) { fixture.Main(m) }

// A Profiled backend times every op while started and changes no result.
func TestProfiled(t *testing.T) {
	m, err := model.Bind(model.PackWeights(fixture.OpenPack(t, "tiny", "q4")))
	if err != nil {
		t.Fatal(err)
	}
	p := backend.NewProfiled(cpu.New(0))
	e, err := model.NewEngine(m, p)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	plain, err := model.NewEngine(m, cpu.New(0))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	ids := []int{2, 17, 33, 5, 90, 41}
	var hidden [2][]float32 // profiled, plain
	for i, eng := range []*model.Engine{e, plain} {
		c := eng.NewCache()
		hidden[i] = make([]float32, len(ids)*m.Hidden())
		if i == 0 {
			p.Start()
		}
		err := eng.Prefill(t.Context(), c, ids, hidden[i])
		p.Stop()
		c.Free()
		if err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(hidden[0], hidden[1]) {
		t.Error("the profiled prefill differs")
	}
	calls := map[string]int{}
	for _, op := range p.Times() {
		calls[op.Op] = op.Calls
	}
	L := m.Layers()
	if calls["MoE"] != L || calls["Attention"] != L || calls["Embed"] != 1 || calls["MatMulNT"] < 6*L {
		t.Errorf("op calls %v for %d layers", calls, L)
	}
}
