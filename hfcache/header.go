package hfcache

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/nlpodyssey/safetensors"
)

// MaxHeaderBytes caps the JSON header of a safetensors file (the limit of
// the reference implementation, huggingface/safetensors MAX_HEADER_SIZE).
const MaxHeaderBytes = 100_000_000

// MaxTensors caps the number of tensors one safetensors header may list.
const MaxTensors = 1 << 20

// tensorLimit is MaxTensors; tests lower it.
var tensorLimit = MaxTensors

// TensorInfo describes one tensor of a safetensors file.
type TensorInfo struct {
	Name  string
	DType codecs.DType
	// Shape is row-major; it may be empty (a scalar) and may hold zeros.
	Shape []int64
	// Offset is ABSOLUTE in the file: 8 + header length + data_offsets[0].
	Offset int64
	// Size is the number of bytes: data_offsets[1] - data_offsets[0].
	Size int64
}

// Header is the parsed and validated header of a safetensors file.
type Header struct {
	// Len is the length N of the JSON header; the data section starts at 8+N.
	Len int64
	// Tensors is sorted by Offset (ties, only possible with zero-size
	// tensors, by Size then Name). The tensors tile the data section exactly.
	Tensors []TensorInfo
	// Metadata is the __metadata__ map (empty, never nil, when absent).
	Metadata map[string]string
}

// ParseHeader parses and validates the header of a safetensors file whose
// ENTIRE contents are file (typically a read-only mapping). Every error wraps
// ErrSafetensors (or ErrHeaderTooLarge, ErrDuplicateTensor or
// ErrUnsupportedDType, which wrap it) and names the problem and the tensor.
//
// Accepted: what github.com/nlpodyssey/safetensors accepts (the structural
// rules of the format: header within MaxHeaderBytes, tensors tiling the data
// section from offset 0 to the end of the file with no hole or overlap, each
// tensor's byte span equal to dtype size × shape), further restricted to a
// header that starts with '{' and is valid UTF-8 with no repeated key, tensor
// names that are non-empty, dtypes BF16, F16 or F32, at most MaxTensors
// tensors of rank at most codecs.MaxRank, integers that fit int64 and a
// __metadata__ that is an object of strings (or null). Trailing whitespace
// padding of the header, zero-size and rank-0 tensors are accepted.
//
// The cost is linear in the header length: a pathological 60 MB header of
// 2^20 tensors takes over ten seconds and about 1 GB of memory (most of it in
// the reference reader); real checkpoints have headers well under 1 MB.
func ParseHeader(file []byte) (*Header, error) {
	return parseHeader(file, "")
}

// HeaderDigest returns the hex SHA-256 of file[0 : 8+N]: the length prefix
// and the JSON header, which together determine every tensor's name, dtype,
// shape and place. It checks only that N is within bounds.
func HeaderDigest(file []byte) (string, error) {
	n, err := headerBounds(file, "")
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(file[:8+n])
	return hex.EncodeToString(sum[:]), nil
}

// rawTensor is a tensor entry as the header states it (offsets relative to
// the data section).
type rawTensor struct {
	name       string
	dtype      codecs.DType
	shape      []int64
	begin, end int64
}

// headerBounds reads the length prefix N and checks it against
// MaxHeaderBytes and the file size, before anything is allocated.
func headerBounds(file []byte, where string) (int64, error) {
	if len(file) < 8 {
		return 0, fail(ErrSafetensors, where, "file is %d bytes, too short for the 8-byte header length", len(file))
	}
	n := binary.LittleEndian.Uint64(file)
	if n > MaxHeaderBytes {
		return 0, fail(ErrHeaderTooLarge, where, "header length %d exceeds the %d-byte cap", n, MaxHeaderBytes)
	}
	if rest := uint64(len(file) - 8); n > rest {
		return 0, fail(ErrHeaderTooLarge, where, "header length %d exceeds the %d bytes after the length prefix (file is %d bytes)", n, rest, len(file))
	}
	return int64(n), nil
}

func parseHeader(file []byte, where string) (*Header, error) {
	n, err := headerBounds(file, where)
	if err != nil {
		return nil, err
	}
	doc := file[8 : 8+n]
	if n == 0 || doc[0] != '{' {
		return nil, fail(ErrSafetensors, where, "header does not start with '{'")
	}
	if !utf8.Valid(doc) {
		return nil, fail(ErrSafetensors, where, "header is not valid UTF-8")
	}
	raw, meta, err := scanHeader(doc, where)
	if err != nil {
		return nil, err
	}
	dataLen := int64(len(file)) - 8 - n
	sorted := slices.Clone(raw)
	slices.SortFunc(sorted, func(a, b rawTensor) int {
		return cmp.Or(cmp.Compare(a.begin, b.begin), cmp.Compare(a.end, b.end), strings.Compare(a.name, b.name))
	})

	// The structural validation of the mandated reader, then our own
	// equivalent check: it names the offending tensors precisely, and it
	// guarantees the invariants Header promises even where the two differ.
	_, md, libErr := safetensors.ReadMetadata(file)
	if err := checkLayout(sorted, dataLen, where); err != nil {
		return nil, err
	}
	if libErr != nil {
		return nil, fail(ErrSafetensors, where, "rejected by the safetensors reader: %s", clipLine(libErr.Error()))
	}
	if err := crossCheck(md, raw, meta); err != nil {
		return nil, fail(ErrSafetensors, where, "internal check: %v", err)
	}

	h := &Header{Len: n, Tensors: make([]TensorInfo, len(sorted)), Metadata: meta}
	if h.Metadata == nil {
		h.Metadata = map[string]string{}
	}
	for i, t := range sorted {
		h.Tensors[i] = TensorInfo{Name: t.name, DType: t.dtype, Shape: t.shape, Offset: 8 + n + t.begin, Size: t.end - t.begin}
	}
	return h, nil
}

// scanHeader walks the header JSON token by token, catching what
// json.Unmarshal-based readers miss: duplicate names, dtypes dgq cannot
// read, oversized counts and ranks, integers beyond int64, a malformed
// __metadata__.
func scanHeader(doc []byte, where string) ([]rawTensor, map[string]string, error) {
	w := newWalker(doc)
	if err := w.delim('{', "the header"); err != nil {
		return nil, nil, fail(ErrSafetensors, where, "header: %v", err)
	}
	var (
		tensors  []rawTensor
		meta     map[string]string
		metaSeen bool
		seen     = make(map[string]struct{})
	)
	for {
		k, ok, err := w.key()
		if err != nil {
			return nil, nil, fail(ErrSafetensors, where, "header: %v", err)
		}
		if !ok {
			break
		}
		if k == "__metadata__" {
			if metaSeen {
				return nil, nil, fail(ErrSafetensors, where, "header holds __metadata__ twice")
			}
			metaSeen = true
			if meta, err = scanMetadata(w); err != nil {
				return nil, nil, fail(ErrSafetensors, where, "__metadata__: %v", err)
			}
			continue
		}
		if _, dup := seen[k]; dup {
			return nil, nil, fail(ErrDuplicateTensor, where, "tensor %s appears twice in the header", quote(k))
		}
		if k == "" {
			return nil, nil, fail(ErrSafetensors, where, "header holds a tensor with an empty name")
		}
		if len(tensors) >= tensorLimit {
			return nil, nil, fail(ErrSafetensors, where, "header lists more than %d tensors", tensorLimit)
		}
		seen[k] = struct{}{}
		t, err := scanTensor(w, k, where)
		if err != nil {
			return nil, nil, err
		}
		tensors = append(tensors, t)
	}
	if err := w.end(); err != nil {
		return nil, nil, fail(ErrSafetensors, where, "header: %v", err)
	}
	return tensors, meta, nil
}

// scanMetadata reads the value of __metadata__: an object of strings, or null.
func scanMetadata(w *walker) (map[string]string, error) {
	tok, err := w.next()
	if err != nil {
		return nil, err
	}
	if tok == nil {
		return nil, nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("is %s, not an object of strings", describe(tok))
	}
	meta := make(map[string]string)
	for {
		k, ok, err := w.key()
		if err != nil {
			return nil, err
		}
		if !ok {
			return meta, nil
		}
		if _, dup := meta[k]; dup {
			return nil, fmt.Errorf("key %s appears twice", quote(k))
		}
		tok, err := w.next()
		if err != nil {
			return nil, err
		}
		v, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("value of key %s is %s, not a string", quote(k), describe(tok))
		}
		meta[k] = v
	}
}

// scanTensor reads one tensor entry {"dtype", "shape", "data_offsets"}.
func scanTensor(w *walker, name, where string) (rawTensor, error) {
	what := "tensor " + quote(name)
	bad := func(format string, args ...any) (rawTensor, error) {
		return rawTensor{}, fail(ErrSafetensors, where, what+": "+format, args...)
	}
	if err := w.delim('{', "the entry"); err != nil {
		return bad("%v", err)
	}
	t := rawTensor{name: name}
	var haveDType, haveShape, haveOffsets bool
	for {
		k, ok, err := w.key()
		if err != nil {
			return bad("%v", err)
		}
		if !ok {
			break
		}
		switch k {
		case "dtype":
			if haveDType {
				return bad(`key "dtype" appears twice`)
			}
			haveDType = true
			tok, err := w.next()
			if err != nil {
				return bad("%v", err)
			}
			s, ok := tok.(string)
			if !ok {
				return bad("dtype is %s, not a string", describe(tok))
			}
			if t.dtype, err = codecs.ParseDType(s); err != nil {
				return rawTensor{}, fail(ErrUnsupportedDType, where, "%s has dtype %s, which dgq cannot read (supported: BF16, F16, F32)", what, bare(s))
			}
		case "shape":
			if haveShape {
				return bad(`key "shape" appears twice`)
			}
			haveShape = true
			if err := w.delim('[', "shape"); err != nil {
				return bad("%v", err)
			}
			t.shape = []int64{}
			for {
				v, done, err := w.count()
				if err != nil {
					return bad("shape: %v", err)
				}
				if done {
					break
				}
				if len(t.shape) == codecs.MaxRank {
					return bad("rank exceeds %d", codecs.MaxRank)
				}
				t.shape = append(t.shape, v)
			}
		case "data_offsets":
			if haveOffsets {
				return bad(`key "data_offsets" appears twice`)
			}
			haveOffsets = true
			if err := w.delim('[', "data_offsets"); err != nil {
				return bad("%v", err)
			}
			var offs []int64
			for {
				v, done, err := w.count()
				if err != nil {
					return bad("data_offsets: %v", err)
				}
				if done {
					break
				}
				if len(offs) == 2 {
					return bad("data_offsets holds more than 2 integers")
				}
				offs = append(offs, v)
			}
			if len(offs) != 2 {
				return bad("data_offsets holds %d integers, not 2", len(offs))
			}
			t.begin, t.end = offs[0], offs[1]
		default:
			return bad("unexpected key %s (an entry holds dtype, shape and data_offsets)", quote(k))
		}
	}
	switch {
	case !haveDType:
		return bad(`missing "dtype"`)
	case !haveShape:
		return bad(`missing "shape"`)
	case !haveOffsets:
		return bad(`missing "data_offsets"`)
	}
	return t, nil
}

// count reads the next element of an array of non-negative integers;
// done=true when the array ends.
func (w *walker) count() (v int64, done bool, err error) {
	tok, err := w.next()
	if err != nil {
		return 0, false, err
	}
	switch x := tok.(type) {
	case json.Delim:
		if x == ']' {
			return 0, true, nil
		}
	case json.Number:
		v, err := parseCount(x)
		return v, false, err
	}
	return 0, false, fmt.Errorf("holds %s, not a non-negative integer", describe(tok))
}

// checkLayout verifies, with messages naming the tensors, what the
// reference reader verifies: each tensor's byte span matches its dtype and
// shape, and the spans tile the data section from 0 to its end with no hole
// and no overlap. sorted is ordered by (begin, end).
func checkLayout(sorted []rawTensor, dataLen int64, where string) error {
	var pos int64
	var prev *rawTensor
	for i := range sorted {
		t := &sorted[i]
		what := "tensor " + quote(t.name)
		if t.end < t.begin {
			return fail(ErrSafetensors, where, "%s: data_offsets [%d, %d] run backwards", what, t.begin, t.end)
		}
		size, ok := byteSize(t.shape, t.dtype)
		if !ok {
			return fail(ErrSafetensors, where, "%s: shape %s of %s overflows int64 bytes", what, fmtShape(t.shape), t.dtype)
		}
		if span := t.end - t.begin; span != size {
			return fail(ErrSafetensors, where, "%s: shape %s of %s is %d bytes but data_offsets [%d, %d] span %d", what, fmtShape(t.shape), t.dtype, size, t.begin, t.end, span)
		}
		switch {
		case t.begin > pos && prev == nil:
			return fail(ErrSafetensors, where, "%s: data_offsets [%d, %d] leave a hole of %d bytes at the start of the data section", what, t.begin, t.end, t.begin)
		case t.begin > pos:
			return fail(ErrSafetensors, where, "hole of %d bytes between tensor %s (data_offsets [%d, %d]) and %s (data_offsets [%d, %d])", t.begin-pos, quote(prev.name), prev.begin, prev.end, what, t.begin, t.end)
		case t.begin < pos:
			return fail(ErrSafetensors, where, "%s (data_offsets [%d, %d]) overlaps tensor %s (data_offsets [%d, %d])", what, t.begin, t.end, quote(prev.name), prev.begin, prev.end)
		}
		if t.end > dataLen {
			return fail(ErrSafetensors, where, "%s: data_offsets [%d, %d] reach past the end of the file (the data section holds %d bytes)", what, t.begin, t.end, dataLen)
		}
		pos, prev = t.end, t
	}
	if pos != dataLen {
		return fail(ErrSafetensors, where, "%d trailing bytes after the tensor data (data ends at %d, the data section holds %d bytes)", dataLen-pos, pos, dataLen)
	}
	return nil
}

// crossCheck compares the reference reader's view of the header with ours.
func crossCheck(md safetensors.Metadata, raw []rawTensor, meta map[string]string) error {
	lib := md.Tensors()
	if len(lib) != len(raw) {
		return fmt.Errorf("the safetensors reader sees %d tensors, the pre-scan %d", len(lib), len(raw))
	}
	for _, t := range raw {
		li, ok := lib[t.name]
		if !ok || li.DType.String() != t.dtype.String() || li.DataOffsets != [2]uint64{uint64(t.begin), uint64(t.end)} ||
			!slices.EqualFunc(li.Shape, t.shape, func(a uint64, b int64) bool { return a == uint64(b) }) {
			return fmt.Errorf("the safetensors reader and the pre-scan disagree about tensor %s", quote(t.name))
		}
	}
	if !maps.Equal(md.Metadata(), meta) {
		return fmt.Errorf("the safetensors reader and the pre-scan disagree about __metadata__")
	}
	return nil
}

// byteSize is the number of bytes of a tensor, with ok=false on int64 overflow.
func byteSize(shape []int64, dt codecs.DType) (int64, bool) {
	n := int64(dt.Size())
	for _, d := range shape {
		if d < 0 {
			return 0, false
		}
		if d != 0 && n > (1<<63-1)/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}

// fmtShape formats a shape the way the header spells it: [2, 3].
func fmtShape(shape []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range shape {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(d, 10))
	}
	b.WriteByte(']')
	return b.String()
}

// clipLine makes a foreign error message one line of bounded length.
func clipLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
