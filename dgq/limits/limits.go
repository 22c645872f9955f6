// Package limits bounds the numbers a user gives dgq: the error every
// out-of-range option is refused with (one line naming the option as the
// user typed it: "--prompt-len 1000000000 exceeds the model's maximum of
// 4096 positions"), the generic caps of options the model does not bound
// (goroutines), and the byte-size option type of --max-memory. Bounds
// that follow from a model (positions, canvas, vocabulary) are checked by
// the packages that read the model's config, with these errors.
//
// It imports nothing of this module but internal/errclass, so every package
// with options can use it.
package limits

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"

	"github.com/dgq-dev/dgq/internal/errclass"
)

// ErrRange: a number given to an option is out of its range. Every
// *RangeError wraps it; class usage (exit 2).
var ErrRange = errclass.New(errclass.Usage, "option out of range")

// RangeError is a number out of its option's range. Its message is one line
// naming the option as the user typed it: Option, Value, Reason.
type RangeError struct {
	Option string // "--prompt-len"
	Value  string // "1000000000", as given
	Reason string // "exceeds the model's maximum of 4096 positions"
}

func (e *RangeError) Error() string { return e.Option + " " + e.Value + " " + e.Reason }

// Unwrap makes errors.Is(err, ErrRange) true.
func (e *RangeError) Unwrap() error { return ErrRange }

// Errorf returns a *RangeError for option and value, the reason formatted.
func Errorf(option string, value any, format string, args ...any) error {
	return &RangeError{Option: option, Value: fmt.Sprint(value), Reason: fmt.Sprintf(format, args...)}
}

// Min refuses v < lo: "--reps 0 must be at least 1".
func Min[T int | int64](option string, v, lo T) error {
	if v < lo {
		return Errorf(option, v, "must be at least %d", lo)
	}
	return nil
}

// Max refuses v > hi; limit names what hi is ("the model's maximum of
// 4096 positions"): "--prompt-len 5000 exceeds the model's maximum of 4096
// positions".
func Max[T int | int64](option string, v, hi T, limit string) error {
	if v > hi {
		return Errorf(option, v, "exceeds %s", limit)
	}
	return nil
}

// NonNegative refuses v < 0; zero names what 0 means ("0 uses every core").
func NonNegative[T int | int64](option string, v T, zero string) error {
	if v < 0 {
		return Errorf(option, v, "is negative (%s)", zero)
	}
	return nil
}

// First returns the first non-nil error of errs. When sentinel is not nil
// it is added to that error's chain (errors.Is finds both) without
// changing its message.
func First(sentinel error, errs ...error) error {
	for _, err := range errs {
		if err != nil {
			if sentinel == nil {
				return err
			}
			return &tagged{err: err, sentinel: sentinel}
		}
	}
	return nil
}

// tagged is an error with a package's sentinel joined to it, silently.
type tagged struct{ err, sentinel error }

func (t *tagged) Error() string   { return t.err.Error() }
func (t *tagged) Unwrap() []error { return []error{t.err, t.sentinel} }

// Goroutine caps: an option naming a number of host goroutines (--workers)
// may ask for up to WorkersPerCPU per logical CPU of the machine, at least
// MinWorkerCap and never more than MaxWorkerCap. Goroutines beyond the
// CPUs only add memory (each encoding worker of quantize holds two
// chunks of about a million values).
const (
	WorkersPerCPU = 4
	MinWorkerCap  = 64
	MaxWorkerCap  = 1024
)

// WorkerCap is the most goroutines a --workers option may ask for on this
// machine: WorkersPerCPU × runtime.NumCPU(), within [MinWorkerCap,
// MaxWorkerCap].
func WorkerCap() int {
	return min(MaxWorkerCap, max(MinWorkerCap, WorkersPerCPU*runtime.NumCPU()))
}

// Workers checks a goroutine count whose 0 means every core: negative
// values and values above WorkerCap are refused.
func Workers(option string, n int) error {
	return First(nil,
		NonNegative(option, n, "0 uses every core"),
		Max(option, n, WorkerCap(), fmt.Sprintf("the limit of %d on this machine (%d per CPU, %d CPUs; at least %d, at most %d)",
			WorkerCap(), WorkersPerCPU, runtime.NumCPU(), MinWorkerCap, MaxWorkerCap)))
}

// MaxBytes is the largest byte size a Bytes option takes (1 PiB).
const MaxBytes = 1 << 50

// Bytes is a byte size given on the command line as a plain number of
// bytes or with a unit: 64GB, 1.5TB (powers of 1000: B, KB, MB, GB, TB,
// PB), 48GiB (powers of 1024: KiB, MiB, GiB, TiB, PiB); units in any
// case. It implements pflag.Value (String, Set, Type). Zero is "not
// given"; Set refuses 0, negative, non-finite and values above MaxBytes.
type Bytes int64

// Type names the value in help texts.
func (b *Bytes) Type() string { return "bytes" }

// String formats the size as Set reads it back.
func (b *Bytes) String() string {
	if b == nil || *b == 0 {
		return ""
	}
	return strconv.FormatInt(int64(*b), 10)
}

// byteUnits are the units Set accepts, lowercase, longest first.
var byteUnits = []struct {
	suffix string
	mult   float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40}, {"pib", 1 << 50},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12}, {"pb", 1e15},
	{"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"t", 1e12}, {"p", 1e15}, {"b", 1},
}

// errBytes is how Set refuses a value; the command line puts the option's
// name and the value in front of it.
var errBytes = errors.New("is not a size: give a positive number of bytes, optionally with a unit (64GB, 1.5TB, 48GiB)")

// Set parses s (see Bytes).
func (b *Bytes) Set(s string) error {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := 1.0
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	switch {
	case err != nil || math.IsNaN(v) || math.IsInf(v, 0):
		return errBytes
	case v*mult < 1:
		return fmt.Errorf("%w; to use what the backend has, leave the option out", errBytes)
	case v*mult > MaxBytes:
		return fmt.Errorf("exceeds the maximum of %d bytes (1 PiB)", int64(MaxBytes))
	}
	*b = Bytes(v * mult)
	return nil
}

// FormatBytes writes n bytes for a message: "14.2 GB" (powers of 1000,
// three significant digits), "512 B" below a kilobyte.
func FormatBytes(n int64) string {
	f := float64(n)
	for _, u := range []struct {
		unit string
		size float64
	}{{"PB", 1e15}, {"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}} {
		if f >= u.size {
			return strconv.FormatFloat(f/u.size, 'f', max(0, 2-int(math.Floor(math.Log10(f/u.size)))), 64) + " " + u.unit
		}
	}
	return strconv.FormatInt(n, 10) + " B"
}
