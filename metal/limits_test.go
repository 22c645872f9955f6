package metal

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dgq-dev/dgq/internal/errclass"
)

func TestWrapLength(t *testing.T) {
	const page = ApplePageSize
	cases := []struct {
		name   string
		addr   uintptr
		n      int
		maxLen uint64
		want   int
		err    error
		says   string
	}{
		{"one page", 4 * page, page, 1 << 30, page, nil, ""},
		{"rounded up", 4 * page, page + 1, 1 << 30, 2 * page, nil, ""},
		{"an expert tail at expert_split 753664", 753664, 2*page + 100, 1 << 30, 3 * page, nil, ""},
		{"exactly the limit", 0, 3 * page, 3 * page, 3 * page, nil, ""},
		{"unaligned start", 4*page + 64, page, 1 << 30, 0, ErrUnaligned, "64 bytes past a 16384-byte page boundary"},
		{"over the limit", 0, 3*page + 1, 3 * page, 0, ErrBufferLimit, "maxBufferLength 49152"},
		{"empty", 0, 0, 1 << 30, 0, ErrArgument, "empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := wrapLength(c.addr, c.n, page, c.maxLen)
			if c.err == nil {
				if err != nil || got != c.want {
					t.Fatalf("wrapLength = %d, %v; want %d", got, err, c.want)
				}
				return
			}
			if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("error %v; want %v mentioning %q", err, c.err, c.says)
			}
		})
	}
}

func TestCheckAlloc(t *testing.T) {
	if n, err := checkAlloc(0, 100); n != 4 || err != nil {
		t.Errorf("checkAlloc(0) = %d, %v; want 4 (Metal has no empty buffer)", n, err)
	}
	if n, err := checkAlloc(100, 100); n != 100 || err != nil {
		t.Errorf("checkAlloc(100) = %d, %v", n, err)
	}
	if _, err := checkAlloc(101, 100); !errors.Is(err, ErrBufferLimit) || !strings.Contains(err.Error(), "maxBufferLength 100") {
		t.Errorf("over the limit: %v", err)
	}
	if _, err := checkAlloc(-1, 100); !errors.Is(err, ErrArgument) {
		t.Errorf("negative: %v", err)
	}
}

func TestCheckGrid(t *testing.T) {
	per := [3]int{1024, 1024, 64}
	cases := []struct {
		groups, threads [3]int
		empty           bool
		ok              bool
	}{
		{[3]int{8, 1, 1}, [3]int{256, 1, 1}, false, true},
		{[3]int{2, 3, 4}, [3]int{8, 8, 4}, false, true},
		{[3]int{0, 1, 1}, [3]int{32, 1, 1}, true, true},    // nothing to run
		{[3]int{1, 1, 1}, [3]int{0, 1, 1}, false, false},   // an empty threadgroup
		{[3]int{1, 1, 1}, [3]int{1, 1, 65}, false, false},  // over the device's z bound
		{[3]int{1, 1, 1}, [3]int{512, 2, 1}, false, false}, // 1024 > the pipeline's 768
		{[3]int{-1, 1, 1}, [3]int{32, 1, 1}, false, false}, // negative grid
		{[3]int{1, 1, 1}, [3]int{768, 1, 1}, false, true},  // exactly the pipeline's bound
		{[3]int{1 << 20, 1, 1}, [3]int{1, 1, 1}, false, true},
	}
	for _, c := range cases {
		empty, err := checkGrid(c.groups, c.threads, 768, per)
		if (err == nil) != c.ok || (c.ok && empty != c.empty) {
			t.Errorf("checkGrid(%v, %v) = %v, %v", c.groups, c.threads, empty, err)
		}
		if err != nil && !errors.Is(err, ErrGeometry) {
			t.Errorf("checkGrid(%v, %v): %v is not ErrGeometry", c.groups, c.threads, err)
		}
	}
}

func TestCheckArg(t *testing.T) {
	var m struct{ Mem } // any non-nil Mem
	ok := []Arg{{Mem: m, Off: 0}, {Mem: m, Off: 64}, {Scalar: []byte{1, 2, 3, 4}}, {Scalar: make([]byte, maxScalarBytes)}}
	for i, a := range ok {
		if err := checkArg(i, a, 64); err != nil {
			t.Errorf("arg %d: %v", i, err)
		}
	}
	bad := []Arg{{}, {Scalar: []byte{}}, {Scalar: make([]byte, maxScalarBytes+1)}, {Mem: m, Off: -4}, {Mem: m, Off: 65}, {Mem: m, Scalar: []byte{1}}}
	for i, a := range bad {
		if err := checkArg(i, a, 64); !errors.Is(err, ErrArgument) {
			t.Errorf("bad arg %d (%+v): %v", i, a, err)
		}
	}
}

func TestOneLine(t *testing.T) {
	log := "program_source:3:5: error: use of undeclared identifier 'x'\n    x = 1;\n    ^\n\n1 error generated.\n"
	got := oneLine(log, 1000)
	want := "program_source:3:5: error: use of undeclared identifier 'x' | x = 1; | ^ | 1 error generated."
	if got != want {
		t.Errorf("oneLine = %q, want %q", got, want)
	}
	long := strings.Repeat("é", 100) // 2 bytes each
	cut := oneLine(long, 51)
	if !utf8.ValidString(cut) || !strings.HasSuffix(cut, "…") || len(cut) > 51+len("…") {
		t.Errorf("cut %q", cut)
	}
}

// The package's sentinels: one line each, the class their exit code follows
// from (cmd/dgq: no_backend → 6), and the general sentinel a specific one
// is a case of.
func TestErrorClasses(t *testing.T) {
	for _, c := range []struct {
		err    error
		class  errclass.Class
		caseOf error // nil: none
	}{
		{ErrUnavailable, errclass.NoBackend, nil},
		{ErrHostUnavailable, errclass.Unclassified, nil},
		{ErrBufferLimit, errclass.NoBackend, nil},
		{ErrUnaligned, errclass.Unclassified, nil},
		{ErrNoSource, errclass.Unclassified, nil},
		{ErrCompile, errclass.Unclassified, nil},
		{ErrNoKernel, errclass.Unclassified, nil},
		{ErrArgument, errclass.Unclassified, nil},
		{ErrGeometry, errclass.Unclassified, ErrArgument},
		{ErrForeign, errclass.Unclassified, ErrArgument},
		{ErrReadOnly, errclass.Unclassified, ErrArgument},
		{ErrAlloc, errclass.Unclassified, nil},
		{ErrCommand, errclass.Unclassified, nil},
		{ErrDivergentBarrier, errclass.Unclassified, ErrCommand},
		{ErrSanitizer, errclass.Unclassified, ErrCommand},
		{ErrClosed, errclass.Unclassified, nil},
	} {
		if got := errclass.Of(c.err); got != c.class {
			t.Errorf("%v: class %v, want %v", c.err, got, c.class)
		}
		if strings.Contains(c.err.Error(), "\n") || !strings.HasPrefix(c.err.Error(), "metal") {
			t.Errorf("%q: not one line starting with metal", c.err)
		}
		if c.caseOf != nil && !errors.Is(c.err, c.caseOf) {
			t.Errorf("%v is not a case of %v", c.err, c.caseOf)
		}
		for _, general := range []error{ErrArgument, ErrCommand} {
			if general != c.err && general != c.caseOf && errors.Is(c.err, general) {
				t.Errorf("%v matches %v", c.err, general)
			}
		}
	}
	ce := &CompileError{Unit: "rope.kern", Kernel: "rope_f32", Log: "line one\nline two"}
	if !errors.Is(ce, ErrCompile) || strings.Contains(ce.Error(), "\n") ||
		ce.Error() != `metal: compile failed: kernel "rope_f32" of unit "rope.kern": line one | line two` {
		t.Errorf("CompileError: %q", ce.Error())
	}
}
