package codecs

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/codecs/internal/testmat"
)

// Cross-architecture golden digests.
//
// TestEncodedDigests encodes a fixed set of deterministic tensors in every
// format with both methods and compares the SHA-256 of the encoded bytes, of
// the DecodeRows output (float32 bits, little-endian) and the bits of the
// encoder's Stats with testdata/crossarch.json. The golden file is written
// on amd64 (where the AVX-512 kernels, proven bit-identical to the Go
// reference, are active):
//
//	go test ./codecs -run TestEncodedDigests -update-crossarch
//
// and checked on every other build: -tags purego on amd64, and arm64 (under
// qemu-user on an amd64 machine: .ci/arm64). A difference there means the
// bytes a user gets depend on the machine that quantized (typically a
// multiply-add fused by the compiler on arm64 where the Go code lacks an
// explicit float32()/float64() conversion).
//
// Every input digest is stored as well, so that a change in how the inputs
// are generated is reported as such and not as a codec difference.
// -crossarch-dump DIR writes every case's input, encoded and decoded bytes to
// DIR, to compare two machines' files byte by byte (cmp -l).

var (
	updateCrossarch = flag.Bool("update-crossarch", false, "rewrite testdata/crossarch.json (run on amd64)")
	dumpCrossarch   = flag.String("crossarch-dump", "", "write each TestEncodedDigests case's input, encoded and decoded bytes to this directory")
)

const crossarchGolden = "testdata/crossarch.json"

// caGoldenFile is the format of testdata/crossarch.json.
type caGoldenFile struct {
	Note  string        `json:"note"`
	Cases []caDigestSet `json:"cases"`
}

// caDigestSet is one case's digests (hex SHA-256) and stats bits, or the
// error the encoder returned.
type caDigestSet struct {
	Name    string `json:"name"`
	Input   string `json:"input"`
	Encoded string `json:"encoded,omitempty"`
	Decoded string `json:"decoded,omitempty"`
	Stats   string `json:"stats,omitempty"` // SumSqErr SumSqRef MaxAbsErr bits (hex), N
	Err     string `json:"err,omitempty"`
}

// caInput is one source tensor; it is encoded in formats with both methods.
type caInput struct {
	name    string
	dt      DType
	shape   []int64
	src     []byte
	formats []Format
}

func caSHA(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// caLdexp is n·2^k rounded once to float32: exact arithmetic in float64
// (|n| < 2^53), then one IEEE conversion, the same on every machine.
func caLdexp(n int64, k int) float32 { return float32(math.Ldexp(float64(n), k)) }

// caClamp keeps v storable in dt: magnitudes at most the largest finite
// bf16 (which every BF16 rounding keeps finite) or, for F16, 65504.
func caClamp(dt DType, v float32) float32 {
	top := math.Float32frombits(0x7f7f0000)
	if dt == F16 {
		top = 65504
	}
	if math.Abs(float64(v)) > float64(top) {
		return float32(math.Copysign(float64(top), float64(v)))
	}
	return v
}

// caGroupKinds is the number of adversarial group kinds of caGroup.
const caGroupKinds = 16

// caGroup fills 32 values of adversarial kind `kind` around magnitude 2^e,
// using only the integer outputs of r and exact arithmetic, so the values
// are the same on every machine.
func caGroup(r *rand.Rand, kind, e int, g []float32) {
	sign := func() int64 { return int64(r.IntN(2)*2 - 1) }
	irwin := func() int64 { // ≈ Gaussian, |n| < 2^22
		var n int64
		for range 4 {
			n += int64(r.IntN(1<<21)) - 1<<20
		}
		return n
	}
	switch kind {
	case 0: // Gaussian-like
		for j := range g {
			g[j] = caLdexp(irwin(), e-22)
		}
	case 1: // small values and one or two outliers
		for j := range g {
			g[j] = caLdexp(irwin(), e-30)
		}
		for range 1 + r.IntN(2) {
			g[r.IntN(32)] = caLdexp(sign()*int64(1<<22+r.IntN(1<<22)), e-22)
		}
	case 2: // constant group (zeros of either sign included)
		var c float32
		switch r.IntN(4) {
		case 0:
			c = 0
		case 1:
			c = float32(math.Copysign(0, -1))
		default:
			c = caLdexp(sign()*int64(128+r.IntN(128)), e-7)
		}
		for j := range g {
			g[j] = c
		}
	case 3: // ±0 with at most one tiny value
		for j := range g {
			g[j] = float32(math.Copysign(0, float64(sign())))
		}
		if r.IntN(2) == 0 {
			g[r.IntN(32)] = caLdexp(sign(), e-20)
		}
	case 4: // affine rounding ties: base + (n+½)·step, with base and base+N·step present
		nmax := []int64{15, 31, 63, 127}[r.IntN(4)]
		base := sign() * int64(r.IntN(64)) // in units of step/2
		for j := range g {
			g[j] = caLdexp(base+2*int64(r.IntN(int(nmax)))+1, e-8)
		}
		g[r.IntN(16)], g[16+r.IntN(16)] = caLdexp(base, e-8), caLdexp(base+2*nmax, e-8)
	case 5: // q8 rounding ties: (n+½)·s with amax = 127·s
		for j := range g {
			g[j] = caLdexp(2*int64(r.IntN(254)-127)+1, e-8)
		}
		g[r.IntN(32)] = caLdexp(sign()*254, e-8)
	case 6: // E2M1 thresholds and their float32 neighbours, amax = 6·den
		mids := []int64{1, 3, 5, 7, 10, 14, 20, 2, 4, 6, 8, 12, 16, 24} // ×¼
		for j := range g {
			v := caLdexp(sign()*mids[r.IntN(len(mids))], e-5)
			switch r.IntN(3) {
			case 1:
				v = math.Nextafter32(v, 0)
			case 2:
				v = math.Nextafter32(v, float32(math.Copysign(math.Inf(1), float64(v))))
			}
			g[j] = v
		}
		g[r.IntN(32)] = caLdexp(24, e-5)
	case 7: // float32 subnormals mixed with band values
		for j := range g {
			if r.IntN(2) == 0 {
				g[j] = math.Float32frombits(uint32(r.IntN(2))<<31 | uint32(1+r.IntN(0x7fffff)))
			} else {
				g[j] = caLdexp(irwin(), e-22)
			}
		}
	case 8: // one nonzero value
		for j := range g {
			g[j] = 0
		}
		g[r.IntN(32)] = caLdexp(sign()*int64(1+r.IntN(1<<24-1)), e-24)
	case 9: // two values
		a, b := caLdexp(sign()*int64(1+r.IntN(255)), e-8), caLdexp(sign()*int64(1+r.IntN(255)), e-8)
		for j := range g {
			if r.IntN(2) == 0 {
				g[j] = a
			} else {
				g[j] = b
			}
		}
	case 10: // nearly equal values (range of a few ulps)
		s := sign()
		for j := range g {
			g[j] = caLdexp(s*int64(1<<23+r.IntN(4)), e-23)
		}
	case 11: // random bit patterns in the band's 20 binades below 2^e
		for j := range g {
			be := min(max(e+127-r.IntN(20), 1), 254)
			g[j] = math.Float32frombits(uint32(r.IntN(2))<<31 | uint32(be)<<23 | uint32(r.IntN(1<<23)))
		}
	case 12: // small integers on a grid
		for j := range g {
			g[j] = caLdexp(int64(r.IntN(17)-8), e-3)
		}
	case 13: // the 1e-8 (affine, q8) and 1e-12 (nvfp4 min/max) thresholds
		t := []float32{1e-8, 1e-12}[r.IntN(2)]
		switch r.IntN(3) {
		case 1:
			t = math.Nextafter32(t, 0)
		case 2:
			t = math.Nextafter32(t, 1)
		}
		lo := float32(0)
		if r.IntN(2) == 0 {
			lo = -t / 2
		}
		for j := range g {
			g[j] = lo
		}
		g[r.IntN(32)] = lo + t
		for range 4 {
			g[r.IntN(32)] = lo + t/4
		}
	case 14: // one sign, values at the top of the band
		s := sign()
		for j := range g {
			g[j] = caLdexp(s*int64(1<<23+r.IntN(1<<23)), e-23)
		}
	default: // heavy tails: every binade of the band's 24 below 2^e
		for j := range g {
			g[j] = caLdexp(sign()*int64(1+r.IntN(255)), e-8-r.IntN(24))
		}
	}
}

// caAdversarial is a stack of len(bands) matrices of rows×k values: matrix
// i holds random adversarial groups around 2^bands[i]. Groups at the top of
// the float range (e ≥ 126) keep one sign, so that every group's range
// max − min stays finite (the min/max affine encoder refuses others).
func caAdversarial(dt DType, seed uint64, bands []int, rows, k int) []byte {
	r := rand.New(rand.NewPCG(seed, 0xc0dec))
	x := make([]float32, len(bands)*rows*k)
	for b, e := range bands {
		m := x[b*rows*k : (b+1)*rows*k]
		for g := 0; g < len(m); g += 32 {
			grp := m[g : g+32]
			caGroup(r, r.IntN(caGroupKinds), e, grp)
			if e >= 126 {
				s := float64(r.IntN(2)*2 - 1)
				for j, v := range grp {
					grp[j] = float32(math.Copysign(float64(v), s))
				}
			}
			for j, v := range grp {
				grp[j] = caClamp(dt, v)
			}
		}
	}
	return fromFloat32(dt, x)
}

// caScaled is testmat values of d, matrix i scaled by 2^exps[i] (exact).
func caScaled(d testmat.Dist, dt DType, seed uint64, exps []int, rows, k int) []byte {
	x := testmat.Values(d, len(exps)*rows*k, seed)
	for i, e := range exps {
		for j := i * rows * k; j < (i+1)*rows*k; j++ {
			x[j] = float32(math.Ldexp(float64(x[j]), e))
		}
	}
	return fromFloat32(dt, x)
}

// caInputs lists the inputs in a fixed order.
func caInputs() []caInput {
	all := Formats()
	var in []caInput
	// Realistic weight matrices at a real K (2816 = 11·256: whole AVX-512 batches).
	const rows, k = 300, 2816
	for _, d := range testmat.Dists {
		in = append(in, caInput{name: fmt.Sprintf("%s-%dx%d", d, rows, k), dt: BF16, shape: []int64{rows, k},
			src: testmat.BF16(d, rows*k, 11), formats: all})
	}
	// K = 2848 = 89·32: each row ends in groups/blocks the kernels leave to the reference.
	in = append(in, caInput{name: "t3-24x2848", dt: BF16, shape: []int64{24, 2848},
		src: testmat.BF16(testmat.StudentT, 24*2848, 12), formats: all})
	// An expert stack: nvfp4 stores one matrix scale per expert.
	in = append(in, caInput{name: "t3-experts-4x64x256", dt: BF16, shape: []int64{4, 64, 256},
		src: caScaled(testmat.StudentT, BF16, 13, []int{0, -4, 5, -11}, 64, 256), formats: all})
	// Other source dtypes.
	in = append(in,
		caInput{name: "t3-64x2816", dt: F32, shape: []int64{64, 2816},
			src: caScaled(testmat.StudentT, F32, 14, []int{0}, 64, 2816), formats: all},
		caInput{name: "gauss-64x2816", dt: F16, shape: []int64{64, 2816},
			src: caScaled(testmat.Gaussian, F16, 15, []int{0}, 64, 2816), formats: all},
		caInput{name: "t3-experts-4x64x256", dt: F32, shape: []int64{4, 64, 256},
			src: caScaled(testmat.StudentT, F32, 16, []int{3, 0, -7, -20}, 64, 256), formats: []Format{Q8, Q4, NVFP4}},
	)
	// Adversarial groups, one magnitude band per matrix (so nvfp4's matrix
	// scale follows the band), from float32 subnormals to the bf16 maximum.
	bands := []int{-140, -126, -100, -60, -27, -26, -10, -5, 0, 10, 40, 100, 126, 127}
	in = append(in,
		caInput{name: "adv-bands", dt: BF16, shape: []int64{int64(len(bands)), 16, 256},
			src: caAdversarial(BF16, 21, bands, 16, 256), formats: all},
		caInput{name: "adv-bands", dt: F32, shape: []int64{int64(len(bands)), 16, 256},
			src: caAdversarial(F32, 22, bands, 16, 256), formats: all},
	)
	f16Bands := []int{-24, -20, -14, -5, 0, 8, 15}
	in = append(in, caInput{name: "adv-bands", dt: F16, shape: []int64{int64(len(f16Bands)), 16, 256},
		src: caAdversarial(F16, 23, f16Bands, 16, 256), formats: all})
	// Rows of 9 groups (18 nvfp4 blocks): kernel batches and reference tails mixed.
	in = append(in, caInput{name: "adv-tail", dt: BF16, shape: []int64{64, 288},
		src: caAdversarial(BF16, 24, []int{-5, -60, 0, 127}, 16, 288), formats: all})
	// Groups whose range overflows float32 (±3e38): MinMax q4/q5/q6 refuse
	// them (ErrRange); Search stores finite parameters.
	wide := make([]float32, 4*64)
	wr := rand.New(rand.NewPCG(25, 0xc0dec))
	for i := range wide {
		wide[i] = caLdexp(int64(wr.IntN(5)-2)*(1<<23+int64(wr.IntN(1<<22))), 126-23)
	}
	in = append(in, caInput{name: "wide-range", dt: BF16, shape: []int64{4, 64},
		src: fromFloat32(BF16, wide), formats: all})
	// Row 135, block 54 of t3-300x2816 and that matrix's amax (so the same
	// nvfp4 matrix scale 0x3abb6db7): the searching nvfp4 encoder's error
	// estimates of block scales 4 and 4.5 differ in the last bit (4.5 wins on
	// amd64), which a fused multiply-subtract in nvfp4ScaleErr reverses.
	tie := []uint16{0xbc11, 0xbb96, 0xbb90, 0x3cd9, 0x3cd5, 0x39ed, 0x3bdf, 0xbcc2, 0x3c1c, 0xbca1, 0xbd0a, 0x3b65, 0x3caa, 0x3cb2, 0xbb73, 0x3c94,
		0x4076, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	tieSrc := make([]byte, 2*len(tie))
	for i, b := range tie {
		binary.LittleEndian.PutUint16(tieSrc[2*i:], b)
	}
	in = append(in, caInput{name: "nvfp4-scale-near-tie", dt: BF16, shape: []int64{2, 16},
		src: tieSrc, formats: []Format{NVFP4}})
	return in
}

// caRun encodes one case and returns its digests.
func caRun(t *testing.T, in caInput, f Format, method Method) caDigestSet {
	t.Helper()
	name := fmt.Sprintf("%s/%s/%s/%s", in.name, in.dt, f, method)
	ds := caDigestSet{Name: name, Input: caSHA(in.src)}
	m, err := FlattenShape(in.shape)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	enc, st, err := EncodeTensor(f, in.dt, m, method, in.src)
	if err != nil {
		if !errors.Is(err, ErrRange) {
			t.Fatalf("%s: %v", name, err)
		}
		ds.Err = "ErrRange"
		return ds
	}
	dec := make([]float32, m.Elements())
	if err := DecodeRows(f, in.dt, m, enc, 0, m.Rows, dec); err != nil {
		t.Fatalf("%s: decode: %v", name, err)
	}
	db := make([]byte, 4*len(dec))
	for i, v := range dec {
		binary.LittleEndian.PutUint32(db[4*i:], math.Float32bits(v))
	}
	ds.Encoded, ds.Decoded = caSHA(enc), caSHA(db)
	ds.Stats = fmt.Sprintf("%016x %016x %016x %d", math.Float64bits(st.SumSqErr), math.Float64bits(st.SumSqRef), math.Float64bits(st.MaxAbsErr), st.N)
	if dir := *dumpCrossarch; dir != "" {
		base := filepath.Join(dir, strings.ReplaceAll(name, "/", "_"))
		for ext, b := range map[string][]byte{".in": in.src, ".enc": enc, ".dec": db} {
			if err := os.WriteFile(base+ext, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return ds
}

// TestEncodedDigests: the encoded bytes, decoded values and stats of every
// case equal the golden digests written on amd64.
func TestEncodedDigests(t *testing.T) {
	if d := *dumpCrossarch; d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var got []caDigestSet
	for _, in := range caInputs() {
		for _, f := range in.formats {
			for _, method := range allMethods {
				got = append(got, caRun(t, in, f, method))
			}
		}
	}
	t.Logf("%s/%s: %d cases, nvfp4 SIMD %v, affine SIMD %v",
		runtime.GOOS, runtime.GOARCH, len(got), nvfp4Fast != nil, caAffineFast())

	if *updateCrossarch {
		if runtime.GOARCH != "amd64" {
			t.Fatalf("the golden digests are written on amd64 (this is %s)", runtime.GOARCH)
		}
		g := caGoldenFile{
			Note: "SHA-256 of each case's encoded bytes and DecodeRows output (float32 LE), the bits of its Stats " +
				"(SumSqErr SumSqRef MaxAbsErr, N) and of its input; written on amd64 by " +
				"go test ./codecs -run TestEncodedDigests -update-crossarch (see crossarch_test.go)",
			Cases: got,
		}
		b, err := json.MarshalIndent(g, "", "\t")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(crossarchGolden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(crossarchGolden, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d cases)", crossarchGolden, len(got))
		return
	}

	b, err := os.ReadFile(crossarchGolden)
	if err != nil {
		t.Fatalf("%v (write it on amd64 with -update-crossarch)", err)
	}
	var g caGoldenFile
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	want := map[string]caDigestSet{}
	for _, c := range g.Cases {
		want[c.Name] = c
		if !caHas(got, c.Name) {
			t.Errorf("%s: in %s but no longer generated (rewrite it with -update-crossarch)", c.Name, crossarchGolden)
		}
	}
	var bad []string
	for _, c := range got {
		w, ok := want[c.Name]
		switch {
		case !ok:
			t.Errorf("%s: not in %s (rewrite it with -update-crossarch)", c.Name, crossarchGolden)
			continue
		case c.Input != w.Input:
			t.Errorf("%s: the input differs from the one the golden digests were made from: the generator changed (or differs on %s), not the codec", c.Name, runtime.GOARCH)
			continue
		}
		var diff []string
		if c.Err != w.Err {
			diff = append(diff, fmt.Sprintf("error %q, want %q", c.Err, w.Err))
		}
		if c.Encoded != w.Encoded {
			diff = append(diff, "encoded bytes")
		}
		if c.Decoded != w.Decoded {
			diff = append(diff, "decoded values")
		}
		if c.Stats != w.Stats {
			diff = append(diff, fmt.Sprintf("stats [%s], want [%s]", c.Stats, w.Stats))
		}
		if len(diff) > 0 {
			bad = append(bad, c.Name)
			t.Errorf("%s: %s differ from the amd64 golden digests", c.Name, strings.Join(diff, "; "))
		}
	}
	if len(bad) > 0 {
		t.Logf("%d of %d cases differ on %s; compare the bytes with -crossarch-dump DIR here and on amd64", len(bad), len(got), runtime.GOARCH)
	}
}

func caHas(ds []caDigestSet, name string) bool {
	for _, d := range ds {
		if d.Name == name {
			return true
		}
	}
	return false
}

// caAffineFast reports whether the affine search runs in a SIMD kernel here
// (a batch of 8 groups the kernel takes returns 8).
func caAffineFast() bool {
	x := make([]float32, 8*32)
	for i := range x {
		x[i] = float32(i % 7)
	}
	return searchAffineGroupsFast(4, x, make([]uint8, len(x)), make([]affineResult, 8)) == 8
}
