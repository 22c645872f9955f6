package check

import (
	"context"
	"errors"
	"fmt"
	"github.com/dgq-dev/dgq/runtime/generate"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/dgq/testmodel"
	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/internal/errclass"
	"github.com/dgq-dev/dgq/runtime/internal/fixture"
)

// quickVerify is a small Verify run: 2 windows of an 8-token prefix, the
// default noise rates, one generation of at most 8 steps.
func quickVerify(o VerifyOptions) VerifyOptions {
	o.Windows, o.Prefix, o.GenSteps, o.Seed = 2, 8, 8, 3
	if o.Generations == 0 {
		o.Generations = 1
	}
	return o
}

func verifyOK(t *testing.T, pack string, o VerifyOptions) *VerifyReport {
	t.Helper()
	r, err := Verify(context.Background(), pack, quickVerify(o))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s vs %s (%s): KLD mean %.4g p99 %.4g p999 %.4g max %.4g, top1 %.3f, acc source %.3f pack %.3f",
		filepath.Base(pack), r.Source, r.SourceKind, r.KLD.Mean, r.KLD.P99, r.KLD.P999, r.KLD.Max, r.Top1, r.Accuracy.Source, r.Accuracy.Pack)
	for _, n := range r.PerNoise {
		t.Logf("  rate %.2f sc %-5v kld %.4g top1 %.3f acc %.3f / %.3f", n.Rate, n.SC, n.KLDMean, n.Top1, n.AccSource, n.AccPack)
	}
	for _, l := range r.Layers {
		ra := "-"
		if l.RouterAgreement != nil {
			ra = fmt.Sprintf("%.3f", *l.RouterAgreement)
		}
		t.Logf("  layer %d rel %.4g cos %.6f router %s", l.Layer, l.RelErr, l.Cosine, ra)
	}
	if g := r.Generation; g != nil {
		t.Logf("  generation: %d runs, %d identical, agreement %.3f, steps/block %.1f / %.1f", g.Runs, g.Identical, g.TokenAgreement, g.StepsPerBlock.Source, g.StepsPerBlock.Pack)
	}
	return r
}

// A bf16 pack against its own source (the snapshot folder it was made
// from, made a temporary bf16 pack) computes the very same numbers: KLD
// exactly 0, top-1 agreement 1, relative error 0, the same routes and
// generations.
func TestVerifyBF16AgainstItsSource(t *testing.T) {
	pack := fixture.PackDir(t, "tiny", "bf16")
	r := verifyOK(t, pack, VerifyOptions{Source: fixture.SnapshotDir(t, "tiny")})
	if r.SourceKind != "snapshot_copy" || r.Text != "random" || r.Windows != 2 || r.Canvas != 16 || r.Backend != "cpu" {
		t.Errorf("report header %+v", r)
	}
	if want := 2 * 4 * 2 * 16; r.Positions != want || r.NonFinite != 0 {
		t.Errorf("positions %d (non-finite %d), want %d", r.Positions, r.NonFinite, want)
	}
	if r.KLD != (VerifyKLD{}) || r.Top1 != 1 || r.Accuracy.Source != r.Accuracy.Pack {
		t.Errorf("kld %+v top1 %g accuracy %+v", r.KLD, r.Top1, r.Accuracy)
	}
	if len(r.PerNoise) != 8 || len(r.Layers) != 7 {
		t.Fatalf("%d noise cells, %d layers", len(r.PerNoise), len(r.Layers))
	}
	for _, l := range r.Layers {
		if l.RelErr != 0 || l.Cosine < 1-1e-12 {
			t.Errorf("layer %d: rel err %g cosine %.15f", l.Layer, l.RelErr, l.Cosine)
		}
		if (l.Layer == 0) != (l.RouterAgreement == nil) || l.RouterAgreement != nil && *l.RouterAgreement != 1 {
			t.Errorf("layer %d: router agreement %v", l.Layer, l.RouterAgreement)
		}
	}
	if g := r.Generation; g == nil || g.Runs != 1 || g.Identical != 1 || g.TokenAgreement != 1 || g.StepsPerBlock.Source != g.StepsPerBlock.Pack || g.StepsPerBlock.Source <= 0 {
		t.Errorf("generation %+v", r.Generation)
	}
}

// A quantized pack differs from its source, by finite amounts; the source
// may be given as a bf16 pack.
func TestVerifyQuantized(t *testing.T) {
	for _, c := range []struct{ fx, profile string }{{"tiny", "q4"}, {"tiny", "nvfp4"}, {"wide", "q4"}} {
		t.Run(c.fx+"/"+c.profile, func(t *testing.T) {
			r := verifyOK(t, fixture.PackDir(t, c.fx, c.profile), VerifyOptions{Source: fixture.PackDir(t, c.fx, "bf16")})
			if r.SourceKind != "pack" {
				t.Errorf("source kind %q", r.SourceKind)
			}
			k := r.KLD
			if !(k.Mean > 0 && k.Mean <= k.P99 && k.P99 <= k.P999 && k.P999 <= k.Max && !math.IsInf(k.Max, 0)) {
				t.Errorf("kld %+v", k)
			}
			if !(r.Top1 >= 0 && r.Top1 < 1) {
				t.Errorf("top1 %g", r.Top1)
			}
			last := r.Layers[len(r.Layers)-1]
			if !(last.RelErr > 0 && last.Cosine < 1) {
				t.Errorf("last layer %+v", last)
			}
			for _, n := range r.PerNoise {
				if n.Positions != 2*r.Canvas || !(n.KLDMean > 0) || n.KLDMax < n.KLDP99 {
					t.Errorf("noise cell %+v", n)
				}
			}
		})
	}
}

// A text file is tokenized with the pack's tokenizer; windows are cut from it.
func TestVerifyText(t *testing.T) {
	text := filepath.Join(t.TempDir(), "held-out.txt")
	para := "The sea was calm that morning, and the fishing boats went out early past the harbour wall. "
	os.WriteFile(text, []byte(strings.Repeat(para, 12)), 0o644)
	plot := filepath.Join(t.TempDir(), "chart.png")
	r := verifyOK(t, fixture.PackDir(t, "tiny", "q4"), VerifyOptions{Source: fixture.PackDir(t, "tiny", "bf16"), Text: text, Windows: 3, Plot: plot})
	if r.Text != text || r.Windows != 2 || r.Plot != plot { // quickVerify asks for 2
		t.Errorf("text %q windows %d plot %q", r.Text, r.Windows, r.Plot)
	}
	f, err := os.Open(plot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, format, err := image.Decode(f)
	if err != nil || format != "png" || img.Bounds().Dx() != PlotWidth || img.Bounds().Dy() != PlotHeight {
		t.Fatalf("plot: %v %q %v", err, format, img)
	}
	// Too short a text for one window.
	os.WriteFile(text, []byte("Too short."), 0o644)
	_, err = Verify(context.Background(), fixture.PackDir(t, "tiny", "q4"), quickVerify(VerifyOptions{Source: fixture.PackDir(t, "tiny", "bf16"), Text: text}))
	if !errors.Is(err, ErrText) || !strings.Contains(err.Error(), "tokens") {
		t.Errorf("short text: %v", err)
	}
}

var _ = png.Decode // registers the PNG decoder for image.Decode

// An overlay pack's default source is its pinned snapshot in the hub cache,
// overlaid as bf16 for the run (no weight copied).
func TestVerifyOverlayDefaultSource(t *testing.T) {
	home := t.TempDir()
	if _, err := testmodel.WriteHubCache(filepath.Join(home, "hub")); err != nil {
		t.Fatal(err)
	}
	setHubHome(t, home)
	pack := filepath.Join(t.TempDir(), "ov.dgq")
	if _, err := dgq.Quantize(context.Background(), dgq.QuantizeOptions{Source: testmodel.HubInfo().Repo, Out: pack, Profile: "q4", Overlay: true}); err != nil {
		t.Fatal(err)
	}
	r := verifyOK(t, pack, VerifyOptions{Generations: -1})
	if r.SourceKind != "snapshot" || !(r.KLD.Mean > 0) || r.Generation != nil {
		t.Errorf("source %s (%s), kld %+v, generation %+v", r.Source, r.SourceKind, r.KLD, r.Generation)
	}
	// The cache gone: the recorded snapshot is stale (exit 4), and the
	// message names the download.
	setHubHome(t, t.TempDir())
	_, err := Verify(context.Background(), pack, quickVerify(VerifyOptions{}))
	if !errors.Is(err, ErrNoSource) || errclass.Of(err) != errclass.Stale || !strings.Contains(err.Error(), "dgq download") {
		t.Errorf("no cache: %v (class %v)", err, errclass.Of(err))
	}
}

func setHubHome(t *testing.T, home string) {
	for _, k := range []string{hfcache.EnvDGQHFHome, hfcache.EnvHFHubCache, hfcache.EnvHFHubCacheLegacy} {
		t.Setenv(k, "")
	}
	t.Setenv(hfcache.EnvHFHome, home)
}

func TestVerifyErrors(t *testing.T) {
	q4, bf16 := fixture.PackDir(t, "tiny", "q4"), fixture.PackDir(t, "tiny", "bf16")
	snapTiny := fixture.SnapshotDir(t, "tiny")
	// A pack made from a folder records only the folder's name: verify
	// needs --source.
	snap, err := testmodel.WriteSnapshot(filepath.Join(t.TempDir(), "snap"))
	if err != nil {
		t.Fatal(err)
	}
	orphan := filepath.Join(t.TempDir(), "orphan.dgq")
	if _, err := dgq.Quantize(context.Background(), dgq.QuantizeOptions{Source: snap, Out: orphan, Profile: "q4"}); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(snap)
	dir := t.TempDir()
	text := filepath.Join(dir, "latin1.txt")
	os.WriteFile(text, []byte("caf\xe9 "), 0o644)
	cases := []struct {
		name    string
		pack    string
		o       VerifyOptions
		want    error
		class   errclass.Class
		mention string
	}{
		{"source only named", orphan, VerifyOptions{}, ErrNoSource, errclass.Usage, "--source"},
		{"source missing", q4, VerifyOptions{Source: filepath.Join(dir, "nope")}, ErrNoSource, errclass.Usage, "nope"},
		{"source not cached", q4, VerifyOptions{Source: "dgq-test/not-here@main"}, ErrNoSource, errclass.Stale, "dgq download"},
		{"quantized source", q4, VerifyOptions{Source: q4}, ErrSourceMismatch, errclass.Usage, "bf16"},
		{"other model", q4, VerifyOptions{Source: fixture.PackDir(t, "wide", "bf16")}, ErrSourceMismatch, errclass.Usage, "HiddenSize 64 vs 96"},
		{"noise rate", bf16, VerifyOptions{NoiseRates: []float64{0.5, 1.5}}, ErrVerifyOptions, errclass.Usage, "1.5"},
		{"windows", bf16, VerifyOptions{Windows: -1}, ErrVerifyOptions, errclass.Usage, "windows"},
		{"plot extension", bf16, VerifyOptions{Source: snapTiny, Plot: filepath.Join(dir, "chart.jpg")}, ErrVerifyOptions, errclass.Usage, ".png"},
		{"plot directory", bf16, VerifyOptions{Source: snapTiny, Plot: filepath.Join(dir, "d.png")}, dgq.ErrUsage, errclass.Usage, "--plot"},
		{"plot inside the pack", bf16, VerifyOptions{Source: snapTiny, Plot: filepath.Join(bf16, "chart.png")}, dgq.ErrUsage, errclass.Usage, "--plot"},
		{"text not UTF-8", bf16, VerifyOptions{Source: snapTiny, Text: text}, ErrText, errclass.Invalid, "UTF-8"},
		// Issue 21: a missing input is invalid input (exit 3), as a missing
		// pack; one that cannot be read (a directory) an I/O failure.
		{"text missing", bf16, VerifyOptions{Source: snapTiny, Text: filepath.Join(dir, "none.txt")}, ErrText, errclass.Invalid, "none.txt"},
		{"text unreadable", bf16, VerifyOptions{Source: snapTiny, Text: dir}, syscall.EISDIR, errclass.IO, dir},
		{"not a pack", dir, VerifyOptions{}, dgq.ErrManifest, errclass.Invalid, "not a dgq pack"},
	}
	os.Mkdir(filepath.Join(dir, "d.png"), 0o755)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := c.o
			if c.o.Windows == 0 {
				o = quickVerify(c.o)
			}
			_, err := Verify(context.Background(), c.pack, o)
			if !errors.Is(err, c.want) || errclass.Of(err) != c.class || !strings.Contains(err.Error(), c.mention) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err %v (class %v), want %v of class %v mentioning %q", err, errclass.Of(err), c.want, c.class, c.mention)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(bf16, "chart.png")); err == nil {
		t.Error("a plot was written on failure")
	}
}

func TestVerifyPercentiles(t *testing.T) {
	v := make([]float64, 1000)
	for i := range v {
		v[i] = float64(i + 1)
	}
	for _, c := range []struct{ q, want float64 }{{0.99, 990}, {0.999, 999}, {1, 1000}, {0, 1}} {
		if got := percentile(v, c.q); got != c.want {
			t.Errorf("percentile(%g) = %g, want %g", c.q, got, c.want)
		}
	}
	if percentile(nil, 0.5) != 0 || mean(nil) != 0 {
		t.Error("empty")
	}
	// KL of two distributions, against the closed form.
	lp, lq := make([]float64, 2), make([]float64, 2)
	logSoftmax([]float32{0, 0}, lp)
	logSoftmax([]float32{0, float32(math.Log(3))}, lq) // q = (1/4, 3/4)
	want := 0.5*math.Log(0.5/0.25) + 0.5*math.Log(0.5/0.75)
	if got := klDivergence(lp, lq); math.Abs(got-want) > 1e-7 { // log 3 rounded to float32
		t.Errorf("KL %g, want %g", got, want)
	}
	if klDivergence(lp, lp) != 0 {
		t.Error("KL(p‖p) ≠ 0")
	}
}

// settleSteps: a position settles at the first step of its final run of
// equal argmaxes; a block's step 1 starts afresh (a rerolled block).
func TestSettleSteps(t *testing.T) {
	var s settleSteps
	for _, st := range []generate.StepTrace{
		{Block: 0, Step: 1, Argmax: []int{5, 6}},
		{Block: 0, Step: 2, Argmax: []int{5, 7}},
		{Block: 0, Step: 3, Argmax: []int{5, 7}},
		{Block: 1, Step: 1, Argmax: []int{1, 1}},
		{Block: 1, Step: 2, Argmax: []int{2, 1}},
		{Block: 1, Step: 1, Argmax: []int{3, 3}}, // rerolled
		{Block: 1, Step: 2, Argmax: []int{3, 4}},
	} {
		s.step(st)
	}
	// Block 0 settles at 1 and 2, block 1 (rerolled) at 1 and 2.
	if n, sum := s.total(2); n != 4 || sum != 6 {
		t.Errorf("total(2) = %d positions, sum %g; want 4, 6", n, sum)
	}
	if n, sum := s.total(1); n != 2 || sum != 3 {
		t.Errorf("total(1) = %d positions, sum %g; want 2, 3", n, sum)
	}
}
