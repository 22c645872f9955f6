package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/runtime/kernels"
)

// cudaUnitDigests pins the sha256 of every CUDA translation unit
// (KernelSource): the text NVRTC compiles, which also keys the cubin cache.
// A change to the CUDA prelude, the common include or a kernel file shows up
// here and must be deliberate; update the digest in the same commit and say
// why.
var cudaUnitDigests = []struct{ file, sha256 string }{
	{"attention.kern", "27c95a1e8d532d809396bc7448a68cb26804d120dcce0af9d2ed20cbf7860db5"},
	{"attn_softmax.kern", "f8b81a4d2116135499c705a88e55010c95c90e0d192c1296fe79939546432e42"},
	{"dequant.kern", "f14c7f774a80cdeea40ee095a8ab55a72e2010cca4277aa6e78e8ef579fbab6f"},
	// elementwise.kern: its comment cites runtime/backend (was runtime.Backend); same code.
	{"elementwise.kern", "e79f864471927cc79bbe9d1b0c96142e3ed7a904321db1b93343f9cf17b4cc94"},
	{"moe_mma.cu", "2466aa00bf4323c191d9598e08ed4320a14c8efe6e77e1fba062e35474c5f1a5"},
	// probe.kern: the arithmetic probe (new).
	{"probe.kern", "f9f015ae1c24112d516f40dfb099ff2f40364bdaf1dcaf6242bd7bc8ab20e95e"},
	{"relayout.kern", "57f6781fbba2d92a18770995e874a42b18677c15e3c2acd5f051d1602493b7f3"},
	{"rmsnorm.kern", "9f56748dea977784a10f7c23523260d5b86caf21852c60dec47a4321cf083199"},
	// rope.kern: a local renamed from half (a type keyword in Metal) to h2, its
	// comment cites runtime/backend (was runtime.Backend); same code.
	{"rope.kern", "58dacadb881d1027c6225db7a2f6d29c9859f245e51a21ba67f5b3dde7729905"},
	{"router.kern", "e2c9d0628bff2066730bd99fc08e23d9484abbafcc67aa2ecbdc7d10e42a9eb3"},
	{"sampler.kern", "c47be727a2efa8458e6c1a2a5cd557b1ecdc36bb203c3f956f8c5070fbbbbb30"},
}

func TestKernelSourceDigests(t *testing.T) {
	var files []string
	for _, tc := range cudaUnitDigests {
		files = append(files, tc.file)
		u, err := KernelSource(tc.file)
		if err != nil {
			t.Errorf("KernelSource(%q): %v", tc.file, err)
			continue
		}
		sum := sha256.Sum256([]byte(u))
		if got := hex.EncodeToString(sum[:]); got != tc.sha256 {
			t.Errorf("KernelSource(%q): sha256 %s, want %s (the CUDA translation unit changed)", tc.file, got, tc.sha256)
		}
	}
	if got, want := strings.Join(KernelFiles(), ","), strings.Join(files, ","); got != want {
		t.Errorf("KernelFiles() = %s, want %s (pin the new file's digest)", got, want)
	}
}

// TestKernelSourceIsDialectUnit checks that a shared file's CUDA unit is the
// dialect package's CUDA unit of it (one prelude, kept in runtime/kernels).
func TestKernelSourceIsDialectUnit(t *testing.T) {
	for _, f := range kernels.Files() {
		got, err := KernelSource(f)
		if err != nil {
			t.Fatal(err)
		}
		want, err := kernels.DialectUnit(kernels.CUDA, f)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: KernelSource differs from kernels.DialectUnit(CUDA)", f)
		}
	}
	if _, err := KernelSource("nope.kern"); err == nil {
		t.Error("KernelSource(nope.kern): no error")
	}
}
