package check

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/dgq/limits"
	"github.com/dgq-dev/dgq/internal/errclass"
	"github.com/dgq-dev/dgq/runtime/internal/fixture"
	"github.com/dgq-dev/dgq/runtime/session"
)

// TestOptionBounds: Bench and Verify refuse every number out of range
// before loading anything, in one line naming the option, the model's
// bounds read from the pack's config (tiny: 4096 positions, a canvas of
// 16); Verify's errors are also ErrVerifyOptions.
func TestOptionBounds(t *testing.T) {
	q4, bf16 := fixture.PackDir(t, "tiny", "q4"), fixture.PackDir(t, "tiny", "bf16")
	bench := func(o BenchOptions) error {
		if o.PromptLen == 0 {
			o.PromptLen = BenchPromptLen
		}
		if o.Reps == 0 {
			o.Reps = BenchReps
		}
		_, err := Bench(context.Background(), q4, o)
		return err
	}
	verify := func(o VerifyOptions) error {
		if o.Windows == 0 {
			o.Windows = VerifyWindows
		}
		if o.Prefix == 0 {
			o.Prefix = VerifyPrefix
		}
		o.Source = bf16
		_, err := Verify(context.Background(), q4, o)
		if err != nil && !errors.Is(err, ErrVerifyOptions) {
			t.Errorf("%v is not ErrVerifyOptions", err)
		}
		return err
	}
	for _, c := range []struct {
		name    string
		err     error
		mention string
	}{
		{"bench prompt", bench(BenchOptions{PromptLen: 1e9}), "--prompt-len 1000000000 exceeds the model's maximum of 4096 positions"},
		{"bench prompt and canvas", bench(BenchOptions{PromptLen: 4090}), "--prompt-len 4090 exceeds the model's maximum of 4096 positions with a canvas of 16 (4106 positions)"},
		{"bench negative prompt", bench(BenchOptions{PromptLen: -1}), "--prompt-len -1 must be at least 1"},
		{"bench canvas", bench(BenchOptions{Canvas: 4097}), "--canvas 4097 exceeds the model's canvas of 16 positions"},
		{"bench negative canvas", bench(BenchOptions{Canvas: -1}), "--canvas -1 is negative"},
		{"bench reps", bench(BenchOptions{Reps: MaxBenchReps + 1}), "--reps 1001 exceeds"},
		{"bench workers", bench(BenchOptions{Load: session.Options{Workers: -5}}), "--workers -5 is negative"},
		{"verify windows", verify(VerifyOptions{Windows: -1}), "--windows -1 must be at least 1"},
		{"verify many windows", verify(VerifyOptions{Windows: 1e8}), "--windows 100000000 exceeds the maximum of 4096 windows"},
		{"verify prefix", verify(VerifyOptions{Prefix: 1e9}), "--prompt-len 1000000000 exceeds the model's maximum of 4096 positions"},
		{"verify canvas", verify(VerifyOptions{Canvas: 100000}), "--canvas 100000 exceeds the model's canvas of 16 positions"},
		{"verify generation", verify(VerifyOptions{GenTokens: 1e8}), "--max-new-tokens 100000000 exceeds the model's maximum of 4096 positions"},
		{"verify generation after the prefix", verify(VerifyOptions{GenTokens: 4000}), "after the 128-token prefix, in whole blocks of 16"},
		{"verify steps", verify(VerifyOptions{GenSteps: 1e5}), "--max-steps 100000 exceeds"},
		{"verify generations", verify(VerifyOptions{Generations: MaxVerifyGenerations + 1}), "--generations 1025 exceeds"},
		{"verify noise rates", verify(VerifyOptions{NoiseRates: []float64{0.5, 1.5}}), "--noise-rates 0.5,1.5 holds noise rate 1.5"},
		{"verify no noise rate", verify(VerifyOptions{NoiseRates: []float64{}}), "--noise-rates"},
		{"verify workers", verify(VerifyOptions{Load: session.Options{Workers: 1 << 20}}), "--workers 1048576 exceeds the limit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !errors.Is(c.err, limits.ErrRange) || errclass.Of(c.err) != errclass.Usage || !strings.Contains(c.err.Error(), c.mention) || strings.Contains(c.err.Error(), "\n") {
				t.Errorf("err %v (class %v), want one naming %q", c.err, errclass.Of(c.err), c.mention)
			}
		})
	}
}
