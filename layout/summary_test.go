package layout

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
)

func TestSummaryTiny(t *testing.T) {
	plan, err := MakePlan(mustPolicy(t, "q4"), tinyTensors(t))
	if err != nil {
		t.Fatal(err)
	}
	rows := plan.Summary()
	byLabel := map[string]ClassSummary{}
	var order []string
	for _, r := range rows {
		byLabel[r.Label()] = r
		order = append(order, r.Label())
	}
	wantOrder := []string{"experts", "attn", "dense", "sc", "vision", "embed", "router", "norm", "layer_scalar", "vision_other", "total"}
	if !reflect.DeepEqual(order, wantOrder) {
		t.Fatalf("rows %v", order)
	}
	ex := byLabel["experts"]
	// 6 layers × 8 experts × (64·64 + 64·32) weights.
	if ex.Format != "q4" || ex.Tensors != 12 || ex.Params != 6*8*(64*64+64*32) {
		t.Errorf("experts row %+v", ex)
	}
	// q4 stores 4 bits + an fp16 scale and bias per 32 weights: 5 bits per weight.
	if math.Abs(ex.BitsPerWeight-5) > 1e-9 {
		t.Errorf("experts bpw %v", ex.BitsPerWeight)
	}
	if r := byLabel["sc"]; r.Format != "q8" || r.Tensors != 3 {
		t.Errorf("sc row %+v", r)
	}
	if r := byLabel["embed"]; r.Format != "raw" || r.BitsPerWeight != 16 || r.Bytes != 512*64*2 {
		t.Errorf("embed row %+v", r)
	}
	// The index metadata counts 676688 parameters; the 12 layer_scalar buffers come on top.
	total := rows[len(rows)-1]
	var tensors int
	var params, bytes int64
	for _, r := range rows[:len(rows)-1] {
		tensors += r.Tensors
		params += r.Params
		bytes += r.Bytes
	}
	if !total.Total() || total.Format != "mixed" || total.Tensors != tensors || total.Tensors != len(plan.Entries) ||
		total.Params != params || total.Bytes != bytes || total.Params != 676688+12 {
		t.Errorf("total %+v (sum %d %d %d)", total, tensors, params, bytes)
	}
}

func TestSummaryMixedAndJSON(t *testing.T) {
	plan := &Plan{Entries: []Entry{
		{Name: "a", Class: Vision, Format: codecs.Q8, DType: codecs.BF16, Shape: []int64{4, 32}, Size: 160},
		{Name: "b", Class: Vision, Format: codecs.Raw, DType: codecs.BF16, Shape: []int64{4, 32}, Size: 256},
	}}
	rows := plan.Summary()
	if len(rows) != 2 || rows[0].Format != "mixed" || rows[0].Params != 256 || rows[1].Format != "mixed" {
		t.Fatalf("rows %+v", rows)
	}
	b, err := json.Marshal(rows)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"class":"vision","format":"mixed","tensors":2,"params":256,"bytes":416,"bits_per_weight":13},` +
		`{"class":"total","format":"mixed","tensors":2,"params":256,"bytes":416,"bits_per_weight":13}]`
	if string(b) != want {
		t.Errorf("json %s", b)
	}
	var back []ClassSummary
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, rows) {
		t.Errorf("round trip %+v %v", back, err)
	}
	empty := (&Plan{}).Summary()
	if len(empty) != 1 || !empty[0].Total() || empty[0].BitsPerWeight != 0 || empty[0].Format != "" {
		t.Errorf("empty plan summary %+v", empty)
	}
}
