package codecs

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"testing"
)

// engineVectors are the original engine's own encoder outputs and decoder
// results (testdata/engine-codec-vectors, see its provenance note).
type engineVectors struct {
	Encode []struct {
		Input   string  `json:"input"`
		Shape   []int64 `json:"shape"`
		Kind    string  `json:"kind"`
		BF16    string  `json:"bf16_le_b64"`
		Encoded string  `json:"encoded_b64"`
	} `json:"encode"`
	Decode []struct {
		Shape []int64 `json:"shape"`
		Kind  string  `json:"kind"`
		Bytes string  `json:"bytes_b64"`
		F32   string  `json:"f32_le_b64"`
	} `json:"decode"`
}

func loadEngineVectors(t *testing.T) engineVectors {
	t.Helper()
	b, err := os.ReadFile("../testdata/engine-codec-vectors/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v engineVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Encode) == 0 || len(v.Decode) == 0 {
		t.Fatal("no vectors")
	}
	return v
}

func b64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// kindMatrix parses a vector's kind and shape.
func kindMatrix(t *testing.T, kind string, shape []int64) (Format, Matrix) {
	t.Helper()
	f, err := ParseKind(kind)
	if err != nil {
		t.Fatal(err)
	}
	m, err := FlattenShape(shape)
	if err != nil {
		t.Fatal(err)
	}
	return f, m
}

// TestMinMaxMatchesEngine: every engine encode case byte for byte.
func TestMinMaxMatchesEngine(t *testing.T) {
	for _, c := range loadEngineVectors(t).Encode {
		f, m := kindMatrix(t, c.Kind, c.Shape)
		got, _, err := EncodeTensor(f, BF16, m, MinMax, b64(t, c.BF16))
		if err != nil {
			t.Fatalf("%s %s %v: %v", c.Input, c.Kind, c.Shape, err)
		}
		want := b64(t, c.Encoded)
		if string(got) != string(want) {
			i := 0
			for i < len(got) && i < len(want) && got[i] == want[i] {
				i++
			}
			t.Errorf("%s %s %v: bytes differ from the engine's at %d of %d/%d", c.Input, c.Kind, c.Shape, i, len(got), len(want))
		}
	}
}

// TestDecodeMatchesEngine: every engine decode case bit for bit (NaN as NaN).
func TestDecodeMatchesEngine(t *testing.T) {
	for _, c := range loadEngineVectors(t).Decode {
		f, m := kindMatrix(t, c.Kind, c.Shape)
		want := b64(t, c.F32)
		got := make([]float32, m.Elements())
		if err := DecodeRows(f, BF16, m, b64(t, c.Bytes), 0, m.Rows, got); err != nil {
			t.Fatal(err)
		}
		for i, g := range got {
			w := math.Float32frombits(binary.LittleEndian.Uint32(want[4*i:]))
			if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
				t.Errorf("%s %v element %d: %v, engine %v", c.Kind, c.Shape, i, g, w)
				break
			}
		}
	}
}
