package dgq

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/layout"
)

// A synthesized 1-layer checkpoint at the real dimensions is a valid snapshot
// with the real names and shapes: it passes the inventory check and its
// shards respect the size limit. (Quantizing it is left to the benchmarks:
// it holds about 3 GB of weights.)
func TestSynthesizeRealShapes(t *testing.T) {
	if testing.Short() {
		t.Skip("writes about 3 GB")
	}
	out := filepath.Join(t.TempDir(), "synth")
	res, err := Synthesize(context.Background(), SynthOptions{Out: out, Layers: 1, Seed: 7, ShardBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := hfcache.OpenSnapshot(out)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	if len(snap.Shards) != res.Shards || res.Shards < 2 {
		t.Fatalf("%d shards, result says %d", len(snap.Shards), res.Shards)
	}
	for _, sh := range snap.Shards {
		if len(sh.Header.Tensors) > 1 && sh.Size > 1<<30+1<<20 {
			t.Errorf("shard %s is %d bytes, over the limit", sh.Name, sh.Size)
		}
	}
	cfgData, _ := snap.ReadFile("config.json", 1<<20)
	cfg, err := layout.ParseConfig(cfgData)
	if err != nil {
		t.Fatal(err)
	}
	var tensors []layout.Tensor
	for _, r := range snap.Tensors() {
		tensors = append(tensors, layout.Tensor{Name: r.Name, DType: r.DType, Shape: r.Shape})
	}
	if err := layout.CheckInventory(cfg, tensors); err != nil {
		t.Fatal(err)
	}
	if cfg.Text.HiddenSize != 2816 || cfg.Text.Layers[0].HeadDim != 512 || cfg.Text.NumExperts != 128 {
		t.Fatalf("config %+v", cfg.Text)
	}
}
