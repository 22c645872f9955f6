package hfcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/nlpodyssey/safetensors"
)

// stFile builds a safetensors file: 8-byte little-endian header length,
// the header, then data.
func stFile(header string, data []byte) []byte {
	return stFileN(uint64(len(header)), append([]byte(header), data...))
}

// stFileN builds a file whose length prefix claims n, followed by rest.
func stFileN(n uint64, rest []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, n)
	return append(b, rest...)
}

// seq returns n bytes 0, 1, 2, … so that misplaced slices are noticed.
func seq(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
	return b
}

type headerCase struct {
	name string
	file []byte
	// want is nil for an accepted file, else the most specific sentinel.
	want error
	// msg must occur in the error message.
	msg string
	// lib: the reference reader must reject this file too (a structural
	// rule it implements); false for rules only dgq enforces.
	lib bool
}

const goodHeader = `{"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}}`

func ent(name, dtype, shape string, b, e int64) string {
	return fmt.Sprintf(`%q:{"dtype":%q,"shape":%s,"data_offsets":[%d,%d]}`, name, dtype, shape, b, e)
}

func hdr(entries ...string) string { return "{" + strings.Join(entries, ",") + "}" }

func headerCases() []headerCase {
	one := func(dtype string) []byte {
		return stFile(hdr(ent("a", "BF16", "[2]", 0, 4), ent("w", dtype, "[4]", 4, 8)), seq(8))
	}
	rank9 := "[1,1,1,1,1,1,1,1,1]"
	cs := []headerCase{
		{name: "good", file: stFile(goodHeader, seq(12))},
		{name: "empty header object", file: stFile("{}", nil)},
		{name: "whitespace padding", file: stFile(hdr(ent("a", "F16", "[3]", 0, 6))+"  \n\t\r   ", seq(6))},
		{name: "serializer padding", file: stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`+"        ", seq(4))},
		{name: "zero-size tensors", file: stFile(hdr(
			ent("z0", "F32", "[0]", 0, 0), ent("a", "BF16", "[2,3]", 0, 12),
			ent("z1", "BF16", "[4,0,2]", 12, 12), ent("b", "F32", "[1]", 12, 16), ent("z2", "F16", "[0]", 16, 16)), seq(16))},
		{name: "only zero-size tensors", file: stFile(hdr(ent("z", "F32", "[0,5]", 0, 0)), nil)},
		{name: "rank-0 tensor", file: stFile(hdr(ent("s", "F32", "[]", 0, 4), ent("t", "BF16", "[]", 4, 6)), seq(6))},
		{name: "metadata null", file: stFile(`{"__metadata__":null,`+ent("a", "F32", "[1]", 0, 4)+"}", seq(4))},
		{name: "metadata empty", file: stFile(`{"__metadata__":{},`+ent("a", "F32", "[1]", 0, 4)+"}", seq(4))},
		{name: "metadata last", file: stFile(`{`+ent("a", "F32", "[1]", 0, 4)+`,"__metadata__":{"k":"v"}}`, seq(4))},
		{name: "rank 8", file: stFile(hdr(ent("a", "F32", "[1,1,1,1,1,1,1,2]", 0, 8)), seq(8))},
		{name: "unicode name", file: stFile(hdr(ent("poids.é\u2603", "F32", "[1]", 0, 4)), seq(4))},

		{name: "empty file", file: nil, want: ErrSafetensors, msg: "too short", lib: true},
		{name: "short file", file: []byte{2, 0, 0}, want: ErrSafetensors, msg: "too short", lib: true},
		{name: "header claims 2^40", file: stFileN(1<<40, []byte("{}")), want: ErrHeaderTooLarge, msg: "header length 1099511627776 exceeds the 100000000-byte cap", lib: true},
		{name: "header claims 2^64-1", file: stFileN(1<<64-1, []byte("{}")), want: ErrHeaderTooLarge, msg: "exceeds the 100000000-byte cap", lib: true},
		{name: "header claims more than the file", file: stFileN(100, []byte("{}")), want: ErrHeaderTooLarge, msg: "header length 100 exceeds the 2 bytes after the length prefix", lib: true},
		{name: "header claims just over the cap", file: stFileN(MaxHeaderBytes+1, []byte("{}")), want: ErrHeaderTooLarge, msg: "cap", lib: true},
		{name: "zero header length", file: stFileN(0, nil), want: ErrSafetensors, msg: "does not start with '{'", lib: true},
		{name: "not JSON", file: stFile(`{"a":`, nil), want: ErrSafetensors, msg: "not valid JSON", lib: true},
		{name: "not JSON garbage", file: stFile(`{garbage}`, nil), want: ErrSafetensors, msg: "not valid JSON", lib: true},
		{name: "not an object", file: stFile(`[1,2]`, nil), want: ErrSafetensors, msg: "does not start with '{'", lib: true},
		{name: "string header", file: stFile(`"abc"`, nil), want: ErrSafetensors, msg: "does not start with '{'", lib: true},
		{name: "leading whitespace", file: stFile(` {}`, nil), want: ErrSafetensors, msg: "does not start with '{'"},
		{name: "trailing garbage in header", file: stFile(`{} x`, nil), want: ErrSafetensors, msg: "unexpected data after the top-level object", lib: true},
		{name: "two objects", file: stFile(`{}{}`, nil), want: ErrSafetensors, msg: "unexpected data after the top-level object", lib: true},
		{name: "NUL padding", file: stFile("{}\x00\x00", nil), want: ErrSafetensors, msg: "unexpected data", lib: true},
		{name: "invalid UTF-8", file: stFile("{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", seq(4)), want: ErrSafetensors, msg: "not valid UTF-8"},
		{name: "duplicate name", file: stFile(hdr(ent("a", "F32", "[1]", 0, 4), ent("b", "F32", "[1]", 4, 8), ent("a", "F32", "[1]", 8, 12)), seq(12)),
			want: ErrDuplicateTensor, msg: `tensor "a" appears twice in the header`},
		{name: "duplicate name same offsets", file: stFile(hdr(ent("a", "F32", "[1]", 0, 4), ent("a", "F32", "[1]", 0, 4)), seq(4)),
			want: ErrDuplicateTensor, msg: `tensor "a" appears twice`},
		{name: "duplicate metadata", file: stFile(`{"__metadata__":{},"__metadata__":{}}`, nil), want: ErrSafetensors, msg: "__metadata__ twice"},
		{name: "duplicate metadata key", file: stFile(`{"__metadata__":{"k":"a","k":"b"}}`, nil), want: ErrSafetensors, msg: `key "k" appears twice`},
		{name: "duplicate dtype key", file: stFile(`{"a":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}}`, seq(4)), want: ErrSafetensors, msg: `tensor "a": key "dtype" appears twice`},
		{name: "F8_E4M3", file: one("F8_E4M3"), want: ErrUnsupportedDType, msg: `tensor "w" has dtype F8_E4M3, which dgq cannot read (supported: BF16, F16, F32)`},
		{name: "weird dtype quoted", file: one("F8\nX"), want: ErrUnsupportedDType, msg: `tensor "w" has dtype "F8\nX", which dgq cannot read`, lib: true},
		{name: "lowercase dtype", file: one("bf16"), want: ErrUnsupportedDType, msg: `has dtype bf16,`, lib: true},
		{name: "dtype not a string", file: stFile(`{"a":{"dtype":2,"shape":[1],"data_offsets":[0,4]}}`, seq(4)), want: ErrSafetensors, msg: `tensor "a": dtype is the number 2, not a string`, lib: true},
		{name: "hole between tensors", file: stFile(hdr(ent("a", "F32", "[1]", 0, 4), ent("b", "F32", "[1]", 8, 12)), seq(12)),
			want: ErrSafetensors, msg: `hole of 4 bytes between tensor "a" (data_offsets [0, 4]) and tensor "b" (data_offsets [8, 12])`, lib: true},
		{name: "hole at start", file: stFile(hdr(ent("a", "F32", "[1]", 4, 8)), seq(8)),
			want: ErrSafetensors, msg: `tensor "a": data_offsets [4, 8] leave a hole of 4 bytes at the start`, lib: true},
		{name: "overlap", file: stFile(hdr(ent("a", "F32", "[2]", 0, 8), ent("b", "F32", "[2]", 4, 12)), seq(12)),
			want: ErrSafetensors, msg: `tensor "b" (data_offsets [4, 12]) overlaps tensor "a" (data_offsets [0, 8])`, lib: true},
		{name: "same span twice", file: stFile(hdr(ent("a", "F32", "[1]", 0, 4), ent("b", "F32", "[1]", 0, 4)), seq(4)),
			want: ErrSafetensors, msg: "overlaps", lib: true},
		{name: "zero-size inside another", file: stFile(hdr(ent("a", "F32", "[2]", 0, 8), ent("z", "F32", "[0]", 4, 4)), seq(8)),
			want: ErrSafetensors, msg: `tensor "z" (data_offsets [4, 4]) overlaps tensor "a"`, lib: true},
		{name: "data beyond file", file: stFile(hdr(ent("a", "F32", "[1]", 0, 4), ent("b", "F32", "[4]", 4, 20)), seq(12)),
			want: ErrSafetensors, msg: `tensor "b": data_offsets [4, 20] reach past the end of the file (the data section holds 12 bytes)`, lib: true},
		{name: "trailing bytes after data", file: stFile(hdr(ent("a", "F32", "[1]", 0, 4)), seq(9)),
			want: ErrSafetensors, msg: "5 trailing bytes after the tensor data (data ends at 4, the data section holds 9 bytes)", lib: true},
		{name: "data but no tensors", file: stFile("{}", seq(3)), want: ErrSafetensors, msg: "3 trailing bytes", lib: true},
		{name: "shape x dtype != size", file: stFile(hdr(ent("a", "BF16", "[2,3]", 0, 24)), seq(24)),
			want: ErrSafetensors, msg: `tensor "a": shape [2, 3] of BF16 is 12 bytes but data_offsets [0, 24] span 24`, lib: true},
		{name: "rank-0 wrong size", file: stFile(hdr(ent("a", "F32", "[]", 0, 0)), nil),
			want: ErrSafetensors, msg: `shape [] of F32 is 4 bytes but data_offsets [0, 0] span 0`, lib: true},
		{name: "offsets backwards", file: stFile(hdr(ent("a", "F32", "[1]", 4, 0)), seq(4)), want: ErrSafetensors, msg: "data_offsets [4, 0] run backwards", lib: true},
		{name: "negative shape", file: stFile(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, seq(4)), want: ErrSafetensors, msg: `tensor "a": shape: -1 is negative`, lib: true},
		{name: "float shape", file: stFile(`{"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}}`, seq(4)), want: ErrSafetensors, msg: "shape: 1.0 is not an integer", lib: true},
		{name: "exponent shape", file: stFile(`{"a":{"dtype":"F32","shape":[1e0],"data_offsets":[0,4]}}`, seq(4)), want: ErrSafetensors, msg: "is not an integer", lib: true},
		{name: "huge shape", file: stFile(`{"a":{"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,4]}}`, seq(4)), want: ErrSafetensors, msg: "9223372036854775808 does not fit int64"},
		{name: "huge shape uint64 overflow", file: stFile(`{"a":{"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,4]}}`, seq(4)), want: ErrSafetensors, msg: "does not fit int64", lib: true},
		{name: "shape product overflows", file: stFile(hdr(ent("a", "BF16", "[4294967296,4294967296]", 0, 4)), seq(4)), want: ErrSafetensors, msg: "overflows int64 bytes", lib: true},
		{name: "shape string", file: stFile(`{"a":{"dtype":"F32","shape":["1"],"data_offsets":[0,4]}}`, seq(4)), want: ErrSafetensors, msg: `shape: holds the string "1", not a non-negative integer`, lib: true},
		{name: "shape nested", file: stFile(`{"a":{"dtype":"F32","shape":[[1]],"data_offsets":[0,4]}}`, seq(4)), want: ErrSafetensors, msg: "shape: holds an array", lib: true},
		{name: "shape not array", file: stFile(`{"a":{"dtype":"F32","shape":1,"data_offsets":[0,4]}}`, seq(4)), want: ErrSafetensors, msg: "shape is the number 1, not an array", lib: true},
		{name: "rank 9", file: stFile(hdr(ent("a", "F32", rank9, 0, 4)), seq(4)), want: ErrSafetensors, msg: "rank exceeds 8"},
		{name: "negative offset", file: stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}`, seq(4)), want: ErrSafetensors, msg: "data_offsets: -4 is negative", lib: true},
		{name: "huge offset", file: stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551615]}}`, seq(4)), want: ErrSafetensors, msg: "does not fit int64"},
		{name: "three offsets", file: stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}`, seq(4)), want: ErrSafetensors, msg: "more than 2 integers", lib: true},
		{name: "one offset", file: stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}}`, seq(4)), want: ErrSafetensors, msg: "holds 1 integers, not 2", lib: true},
		{name: "missing dtype", file: stFile(`{"a":{"shape":[1],"data_offsets":[0,4]}}`, seq(4)), want: ErrSafetensors, msg: `tensor "a": missing "dtype"`, lib: true},
		{name: "missing shape", file: stFile(`{"a":{"dtype":"F32","data_offsets":[0,4]}}`, seq(4)), want: ErrSafetensors, msg: `missing "shape"`, lib: true},
		{name: "missing offsets", file: stFile(`{"a":{"dtype":"F32","shape":[1]}}`, seq(4)), want: ErrSafetensors, msg: `missing "data_offsets"`, lib: true},
		{name: "unknown key", file: stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}}`, seq(4)), want: ErrSafetensors, msg: `unexpected key "x"`, lib: true},
		{name: "entry not object", file: stFile(`{"a":[1]}`, nil), want: ErrSafetensors, msg: `tensor "a": the entry is an array, not an object`, lib: true},
		{name: "empty name", file: stFile(hdr(ent("", "F32", "[1]", 0, 4)), seq(4)), want: ErrSafetensors, msg: "empty name"},
		{name: "metadata not string map", file: stFile(`{"__metadata__":{"format":1}}`, nil), want: ErrSafetensors, msg: `__metadata__: value of key "format" is the number 1, not a string`, lib: true},
		{name: "metadata nested", file: stFile(`{"__metadata__":{"format":{"a":"b"}}}`, nil), want: ErrSafetensors, msg: "is an object, not a string", lib: true},
		{name: "metadata not object", file: stFile(`{"__metadata__":"pt"}`, nil), want: ErrSafetensors, msg: `__metadata__: is the string "pt", not an object of strings`, lib: true},
		{name: "metadata array", file: stFile(`{"__metadata__":["pt"]}`, nil), want: ErrSafetensors, msg: "is an array, not an object of strings", lib: true},
	}
	for _, dt := range []string{"F8_E4M3", "F8_E5M2", "F8_E8M0", "F8_E4M3FNUZ", "F4", "F6_E2M3", "F6_E3M2", "I64", "U64", "F64", "BOOL", "U8", "I8", "I16", "U16", "I32", "U32", "C64"} {
		cs = append(cs, headerCase{name: "dtype " + dt, file: one(dt), want: ErrUnsupportedDType,
			msg: `tensor "w" has dtype ` + dt + `, which dgq cannot read (supported: BF16, F16, F32)`})
	}
	return cs
}

func TestParseHeader(t *testing.T) {
	for _, tc := range headerCases() {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ParseHeader(tc.file)
			_, _, libErr := safetensors.ReadMetadata(tc.file)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("ParseHeader: %v", err)
				}
				if libErr != nil {
					t.Fatalf("the reference reader rejects an accepted file: %v", libErr)
				}
				checkInvariants(t, tc.file, h)
				return
			}
			if err == nil {
				t.Fatalf("accepted, want %v", tc.want)
			}
			if !errors.Is(err, tc.want) || !errors.Is(err, ErrSafetensors) {
				t.Errorf("error %v is not %v", err, tc.want)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.msg) {
				t.Errorf("error %q does not contain %q", msg, tc.msg)
			}
			if !strings.HasPrefix(msg, "hfcache: ") || strings.ContainsAny(msg, "\n\r") {
				t.Errorf("error %q is not one line prefixed hfcache:", msg)
			}
			if tc.lib && libErr == nil {
				t.Errorf("the reference reader accepts this file")
			}
		})
	}
}

func TestParseHeaderGood(t *testing.T) {
	file := stFile(goodHeader, seq(12))
	h, err := ParseHeader(file)
	if err != nil {
		t.Fatal(err)
	}
	base := int64(8 + len(goodHeader))
	want := []TensorInfo{
		{Name: "a", DType: codecs.BF16, Shape: []int64{2}, Offset: base, Size: 4},
		{Name: "b", DType: codecs.F32, Shape: []int64{2}, Offset: base + 4, Size: 8},
	}
	if h.Len != int64(len(goodHeader)) {
		t.Errorf("Len = %d, want %d", h.Len, len(goodHeader))
	}
	if len(h.Tensors) != len(want) {
		t.Fatalf("tensors = %+v", h.Tensors)
	}
	for i, w := range want {
		g := h.Tensors[i]
		if g.Name != w.Name || g.DType != w.DType || !slices.Equal(g.Shape, w.Shape) || g.Offset != w.Offset || g.Size != w.Size {
			t.Errorf("tensor %d = %+v, want %+v", i, g, w)
		}
	}
	if len(h.Metadata) != 1 || h.Metadata["format"] != "pt" {
		t.Errorf("metadata = %v", h.Metadata)
	}

	// Rank 0, zero size, shape [] keeps a non-nil empty shape.
	h, err = ParseHeader(stFile(hdr(ent("z", "F32", "[0]", 0, 0), ent("s", "F32", "[]", 0, 4)), seq(4)))
	if err != nil {
		t.Fatal(err)
	}
	if h.Tensors[0].Name != "z" || h.Tensors[0].Size != 0 || h.Tensors[1].Name != "s" || h.Tensors[1].Shape == nil || len(h.Tensors[1].Shape) != 0 {
		t.Errorf("tensors = %+v", h.Tensors)
	}
	if h.Metadata == nil {
		t.Error("Metadata is nil")
	}
}

func TestParseHeaderTensorLimit(t *testing.T) {
	defer func(n int) { tensorLimit = n }(tensorLimit)
	tensorLimit = 3
	var es []string
	for i := range 4 {
		es = append(es, ent(fmt.Sprint("t", i), "F32", "[1]", int64(4*i), int64(4*i+4)))
	}
	if _, err := ParseHeader(stFile(hdr(es[:3]...), seq(12))); err != nil {
		t.Fatalf("3 tensors: %v", err)
	}
	_, err := ParseHeader(stFile(hdr(es...), seq(16)))
	if !errors.Is(err, ErrSafetensors) || !strings.Contains(err.Error(), "more than 3 tensors") {
		t.Fatalf("4 tensors: %v", err)
	}
}

// TestParseHeaderSerialize round-trips through the mandated library's writer.
func TestParseHeaderSerialize(t *testing.T) {
	views := map[string]safetensors.TensorView{}
	add := func(name string, dt safetensors.DType, shape []uint64, n int) {
		v, err := safetensors.NewTensorView(dt, shape, seq(n))
		if err != nil {
			t.Fatal(err)
		}
		views[name] = v
	}
	add("model.embed.weight", safetensors.BF16, []uint64{3, 5}, 30)
	add("model.norm.weight", safetensors.F32, []uint64{5}, 20)
	add("model.layers.0.proj", safetensors.F16, []uint64{2, 2, 3}, 24)
	add("model.empty", safetensors.F32, []uint64{0, 4}, 0)
	add("model.odd", safetensors.BF16, []uint64{1}, 2)
	meta := map[string]string{"format": "pt", "note": "round trip"}
	file, err := safetensors.Serialize(views, meta)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParseHeader(file)
	if err != nil {
		t.Fatalf("ParseHeader(Serialize(...)): %v", err)
	}
	checkInvariants(t, file, h)
	if len(h.Tensors) != len(views) {
		t.Fatalf("%d tensors, want %d", len(h.Tensors), len(views))
	}
	st, err := safetensors.Deserialize(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range h.Tensors {
		v, ok := st.Tensor(ti.Name)
		if !ok {
			t.Fatalf("tensor %q unknown to the library", ti.Name)
		}
		if ti.DType.String() != v.DType().String() {
			t.Errorf("%s: dtype %v, library %v", ti.Name, ti.DType, v.DType())
		}
		if !slices.EqualFunc(ti.Shape, v.Shape(), func(a int64, b uint64) bool { return uint64(a) == b }) {
			t.Errorf("%s: shape %v, library %v", ti.Name, ti.Shape, v.Shape())
		}
		if got := file[ti.Offset : ti.Offset+ti.Size]; !bytes.Equal(got, v.Data()) || !bytes.Equal(got, views[ti.Name].Data()) {
			t.Errorf("%s: bytes differ", ti.Name)
		}
	}
	if len(h.Metadata) != 2 || h.Metadata["note"] != "round trip" {
		t.Errorf("metadata = %v", h.Metadata)
	}
}

func TestHeaderDigest(t *testing.T) {
	file := stFile(goodHeader, seq(12))
	d, err := HeaderDigest(file)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(file[:8+len(goodHeader)])
	if d != hex.EncodeToString(sum[:]) {
		t.Errorf("digest %s", d)
	}
	// The data does not enter the digest.
	other := stFile(goodHeader, bytes.Repeat([]byte{0xff}, 12))
	if d2, _ := HeaderDigest(other); d2 != d {
		t.Errorf("digest depends on the data")
	}
	for _, bad := range [][]byte{nil, {1, 2}, stFileN(1<<40, []byte("{}")), stFileN(10, []byte("{}"))} {
		if _, err := HeaderDigest(bad); !errors.Is(err, ErrSafetensors) {
			t.Errorf("HeaderDigest(%q) error %v", bad, err)
		}
	}
}

// TestTinyShards parses every shard of the tiny checkpoint directly.
func TestTinyShards(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(tinyFlat, "*.safetensors"))
	if err != nil || len(paths) != 4 {
		t.Fatalf("shards %v, %v", paths, err)
	}
	var total int64
	count := 0
	for _, p := range paths {
		file, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		h, err := ParseHeader(file)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		checkInvariants(t, file, h)
		if h.Metadata["format"] != "pt" {
			t.Errorf("%s: metadata %v", p, h.Metadata)
		}
		for _, ti := range h.Tensors {
			if ti.DType != codecs.BF16 {
				t.Errorf("%s: %s is %v", p, ti.Name, ti.DType)
			}
			total += ti.Size
		}
		count += len(h.Tensors)
	}
	if count != tinyTensors || total != tinyTotalSize {
		t.Errorf("%d tensors of %d bytes, want %d of %d", count, total, tinyTensors, tinyTotalSize)
	}
}

// checkInvariants asserts what an accepted Header promises about file.
func checkInvariants(t testing.TB, file []byte, h *Header) {
	t.Helper()
	n := int64(binary.LittleEndian.Uint64(file))
	if h.Len != n || n > MaxHeaderBytes {
		t.Fatalf("Len %d, prefix %d", h.Len, n)
	}
	pos := 8 + n
	names := map[string]bool{}
	for _, ti := range h.Tensors {
		if ti.Offset != pos {
			t.Fatalf("tensor %q at %d, want %d (no tiling)", ti.Name, ti.Offset, pos)
		}
		if ti.Size < 0 || ti.Offset+ti.Size > int64(len(file)) || ti.Offset+ti.Size < ti.Offset {
			t.Fatalf("tensor %q [%d, +%d) outside the %d-byte file", ti.Name, ti.Offset, ti.Size, len(file))
		}
		if !ti.DType.Valid() || len(ti.Shape) > codecs.MaxRank || ti.Name == "" || names[ti.Name] {
			t.Fatalf("tensor %+v", ti)
		}
		names[ti.Name] = true
		want, ok := byteSize(ti.Shape, ti.DType)
		if !ok || want != ti.Size {
			t.Fatalf("tensor %q: size %d for shape %v of %v", ti.Name, ti.Size, ti.Shape, ti.DType)
		}
		pos += ti.Size
	}
	if pos != int64(len(file)) {
		t.Fatalf("data ends at %d, file is %d bytes", pos, len(file))
	}
	if h.Metadata == nil {
		t.Fatal("nil Metadata")
	}
}
