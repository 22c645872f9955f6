package limits

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/internal/errclass"
)

// TestChecks: each check refuses what it should with one line naming the
// option and its value, wrapping ErrRange (class usage), and passes the
// rest.
func TestChecks(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want string // "" for no error
	}{
		{"min below", Min("--reps", 0, 1), "--reps 0 must be at least 1"},
		{"min at", Min("--reps", 1, 1), ""},
		{"max above", Max("--prompt-len", int64(1e9), 4096, "the model's maximum of 4096 positions"), "--prompt-len 1000000000 exceeds the model's maximum of 4096 positions"},
		{"max at", Max("--prompt-len", 4096, 4096, "x"), ""},
		{"negative", NonNegative("--canvas", -1, "0 is the model's canvas"), "--canvas -1 is negative (0 is the model's canvas)"},
		{"zero", NonNegative("--canvas", 0, "x"), ""},
		{"workers negative", Workers("--workers", -3), "--workers -3 is negative (0 uses every core)"},
		{"workers huge", Workers("--workers", 100000), "--workers 100000 exceeds the limit of"},
		{"workers all cores", Workers("--workers", 0), ""},
		{"workers at the cap", Workers("--workers", WorkerCap()), ""},
		{"first of several", First(nil, nil, Min("--a", 0, 1), Min("--b", 0, 1)), "--a 0 must be at least 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.want == "" {
				if c.err != nil {
					t.Fatalf("err %v", c.err)
				}
				return
			}
			if !errors.Is(c.err, ErrRange) || errclass.Of(c.err) != errclass.Usage || !strings.HasPrefix(c.err.Error(), c.want) || strings.Contains(c.err.Error(), "\n") {
				t.Fatalf("err %v (class %v), want %q", c.err, errclass.Of(c.err), c.want)
			}
		})
	}
}

// TestFirstSentinel: a package's sentinel joins the error's chain without
// changing its message.
func TestFirstSentinel(t *testing.T) {
	sentinel := errclass.New(errclass.Usage, "pkg: invalid options")
	err := First(sentinel, Min("--windows", 0, 1))
	if !errors.Is(err, sentinel) || !errors.Is(err, ErrRange) || err.Error() != "--windows 0 must be at least 1" {
		t.Fatalf("err %v", err)
	}
	if First(sentinel, nil, nil) != nil {
		t.Fatal("no error became one")
	}
}

// TestWorkerCap: WorkersPerCPU per CPU within [MinWorkerCap, MaxWorkerCap].
func TestWorkerCap(t *testing.T) {
	c := WorkerCap()
	if c < MinWorkerCap || c > MaxWorkerCap || (c > MinWorkerCap && c < MaxWorkerCap && c != WorkersPerCPU*runtime.NumCPU()) {
		t.Fatalf("WorkerCap %d on %d CPUs", c, runtime.NumCPU())
	}
}

// TestBytes: sizes with and without units; what is no size or too large
// is refused.
func TestBytes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64 // 0: refused
	}{
		{"1000", 1000}, {"64GB", 64e9}, {"64gb", 64e9}, {"64G", 64e9}, {"1.5TB", 1.5e12}, {"48GiB", 48 << 30},
		{"512 MiB", 512 << 20}, {"1kB", 1000}, {"1KiB", 1024}, {"7B", 7}, {"1PiB", 1 << 50},
		{"0", 0}, {"-1", 0}, {"-5GB", 0}, {"0.1", 0}, {"2PB", 0}, {"1e30", 0}, {"NaN", 0}, {"Inf", 0}, {"", 0}, {"GB", 0}, {"12 parsecs", 0},
	} {
		var b Bytes
		err := b.Set(c.in)
		switch {
		case c.want == 0 && err == nil:
			t.Errorf("%q: accepted as %d", c.in, b)
		case c.want != 0 && (err != nil || int64(b) != c.want):
			t.Errorf("%q: %d, %v; want %d", c.in, b, err, c.want)
		}
	}
	b := Bytes(64e9)
	if b.String() != "64000000000" || b.Type() != "bytes" {
		t.Errorf("String %q, Type %q", b.String(), b.Type())
	}
}

func TestFormatBytes(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{512, "512 B"}, {1000, "1.00 kB"}, {15_500_000, "15.5 MB"}, {241e9, "241 GB"}, {1.5e12, "1.50 TB"}} {
		if got := FormatBytes(c.n); got != c.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
