package check

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/runtime/internal/fixture"
)

// qualityRow is one pack of the quality table.
type qualityRow struct {
	Checkpoint string `json:"checkpoint"`
	Profile    string `json:"profile"`
	// Encoder is minmax, search, or search+imatrix (the checkpoint's
	// calib.imatrix.safetensors).
	Encoder       string  `json:"encoder"`
	BlobBytes     int64   `json:"blob_bytes"`
	BitsPerWeight float64 `json:"bits_per_weight"`
	KLDMean       float64 `json:"kld_mean"`
	KLDP99        float64 `json:"kld_p99"`
	KLDMax        float64 `json:"kld_max"`
	// KLDVsRounding is KLDMean over the checkpoint's rounding KLD (its bf16
	// pack in bf16 arithmetic against itself in f32, measured on cuda on the
	// same windows); null where no cuda backend ran.
	KLDVsRounding *float64 `json:"kld_vs_rounding"`
	Top1          float64  `json:"top1_agreement"`
	AccPack       float64  `json:"accuracy_pack"`
	AccSource     float64  `json:"accuracy_source"`
	StepsPack     float64  `json:"steps_per_block_pack"`
	StepsSrc      float64  `json:"steps_per_block_source"`
	// StepCost is pack steps / source steps over the blocks of the seeded
	// generations, StepCostCI95 its paired-bootstrap interval.
	StepCost     float64    `json:"step_cost"`
	StepCostCI95 [2]float64 `json:"step_cost_ci95"`
	Blocks       int        `json:"blocks"`
	// SettlePack and SettleSrc: the step after which a block's argmax canvas
	// no longer changed (VerifyGeneration.SettleSteps).
	SettlePack float64 `json:"settle_steps_pack"`
	SettleSrc  float64 `json:"settle_steps_source"`
	TokAgree   float64 `json:"generation_token_agreement"`
}

// qualityCheckpoint is one checkpoint of the table and how it is measured.
type qualityCheckpoint struct {
	name        string
	windows     int // of heldout.txt
	generations int // seeded generations of genTokens new tokens
	genTokens   int
	rounding    *float64 // the rounding KLD mean, when measured
}

// TestQualityTable measures docs/quality.md: every profile of the two
// trained checkpoints (testdata/trained and testdata/converging), with the
// engine's min/max encoder, the searching encoder and the searching encoder
// weighted by the checkpoint's importance matrix (calib.imatrix.safetensors,
// made by dgq calibrate from calib.txt, which is disjoint from the held-out
// text), against its bf16 pack on the held-out text (check.Verify, cpu
// backend); where a cuda backend runs, each checkpoint's rounding KLD (its
// bf16 source in bf16 arithmetic against f32, same windows) too. It writes
// quality.json, quality-table.md (one table per checkpoint), quality.png
// (testdata/trained) and quality-converging.png into $DGQ_QUALITY_OUT:
//
//	DGQ_QUALITY_OUT=$PWD/docs go test ./runtime/check -run TestQualityTable -v -timeout 90m
//
// (with quality-rounding.json from TestQualityRounding in that folder, or
// on a machine where cuda runs).
func TestQualityTable(t *testing.T) {
	out := os.Getenv("DGQ_QUALITY_OUT")
	if out == "" {
		t.Skip("set DGQ_QUALITY_OUT=DIR to measure the quality table")
	}
	checkpoints := qualityCheckpoints()
	// the rounding KLDs TestQualityRounding measured (on a machine with
	// cuda), when this run has none
	if b, err := os.ReadFile(filepath.Join(out, "quality-rounding.json")); err == nil {
		var rk map[string]float64
		if err := json.Unmarshal(b, &rk); err != nil {
			t.Fatal(err)
		}
		for _, cp := range checkpoints {
			if v, ok := rk[cp.name]; ok {
				cp.rounding = &v
			}
		}
	}
	var rows []qualityRow
	var md strings.Builder
	for _, cp := range checkpoints {
		cpRows := qualityRows(t, cp)
		rows = append(rows, cpRows...)
		fmt.Fprintf(&md, "%s (rounding KLD %s):\n\n", cp.name, fmtOptional(cp.rounding, "%.3g", "not measured"))
		md.WriteString("| profile | encoder | blob MB | bits/weight | KLD mean | KLD p99 | × rounding | top-1 | steps per block (pack / bf16) | step cost [95 % CI] | settled at step (pack / bf16) | generated tokens equal |\n")
		md.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, r := range cpRows {
			fmt.Fprintf(&md, "| %s | %s | %.2f | %.2f | %.3g | %.3g | %s | %.4f | %.1f / %.1f | %.3f [%.3f, %.3f] | %.1f / %.1f | %.3f |\n",
				r.Profile, r.Encoder, float64(r.BlobBytes)/1e6, r.BitsPerWeight, r.KLDMean, r.KLDP99,
				fmtOptional(r.KLDVsRounding, "%.3g", "-"), r.Top1, r.StepsPack, r.StepsSrc, r.StepCost, r.StepCostCI95[0],
				r.StepCostCI95[1], r.SettlePack, r.SettleSrc, r.TokAgree)
		}
		md.WriteString("\n")
		name := "quality.png"
		if cp.name != "trained" {
			name = "quality-" + cp.name + ".png"
		}
		writeChart(t, filepath.Join(out, name), qualityChart(cpRows))
	}
	js, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"quality.json": js, "quality-table.md": []byte(md.String())} {
		if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Log("\n" + md.String())
}

// qualityCheckpoints are the table's checkpoints and their measurements.
func qualityCheckpoints() []*qualityCheckpoint {
	return []*qualityCheckpoint{
		{name: "trained", windows: 16, generations: 4, genTokens: 32},
		{name: "converging", windows: 16, generations: 16, genTokens: 64},
	}
}

// qualityVerifyOptions are the table's verify options for a checkpoint.
func qualityVerifyOptions(cp *qualityCheckpoint, source string) VerifyOptions {
	text := filepath.Join("..", "..", "testdata", cp.name, "heldout.txt")
	return VerifyOptions{Source: source, Text: text, Windows: cp.windows, Prefix: VerifyPrefix, Generations: cp.generations, GenTokens: cp.genTokens}
}

// roundingKLD measures a bf16 pack's rounding KLD on cuda with the table's
// windows (nil where cuda cannot run).
func roundingKLD(t *testing.T, source string, opts VerifyOptions) *float64 {
	ro := opts
	ro.Rounding, ro.Generations = true, -1
	ro.Load.Backend = "cuda"
	r, err := Verify(context.Background(), source, ro)
	if err != nil || r.RoundingKLDMean == nil {
		t.Logf("rounding KLD not measured: %v", err)
		return nil
	}
	return r.RoundingKLDMean
}

// TestQualityRounding measures only the rounding KLD of each checkpoint of
// the quality table (its bf16 pack in bf16 arithmetic against itself in f32,
// on cuda, the table's windows) and writes quality-rounding.json into
// $DGQ_QUALITY_OUT, which TestQualityTable then reads: run it where cuda
// runs, the table anywhere.
func TestQualityRounding(t *testing.T) {
	out := os.Getenv("DGQ_QUALITY_OUT")
	if out == "" {
		t.Skip("set DGQ_QUALITY_OUT=DIR to measure the quality table's rounding KLDs")
	}
	res := map[string]float64{}
	for _, cp := range qualityCheckpoints() {
		source := filepath.Join(t.TempDir(), "bf16")
		if _, err := dgq.Quantize(context.Background(), dgq.QuantizeOptions{Source: fixture.SnapshotDir(t, cp.name), Out: source, Profile: "bf16"}); err != nil {
			t.Fatal(err)
		}
		rk := roundingKLD(t, source, qualityVerifyOptions(cp, source))
		if rk == nil {
			t.Skip("no cuda backend here")
		}
		res[cp.name] = *rk
		t.Logf("%s: rounding KLD %.4g", cp.name, *rk)
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "quality-rounding.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
}

// qualityRows measures one checkpoint: bf16, then every profile with each
// encoder.
func qualityRows(t *testing.T, cp *qualityCheckpoint) []qualityRow {
	src := fixture.SnapshotDir(t, cp.name)
	imatrix := filepath.Join("..", "..", "testdata", cp.name, "calib.imatrix.safetensors")
	tmp := t.TempDir()
	quantize := func(profile, enc string) string {
		p := filepath.Join(tmp, profile+"-"+enc)
		o := dgq.QuantizeOptions{Source: src, Out: p, Profile: profile, Encoder: codecs.Search}
		switch enc {
		case "minmax":
			o.Encoder = codecs.MinMax
		case "search+imatrix":
			o.Imatrix = imatrix
		}
		if _, err := dgq.Quantize(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		return p
	}
	source := quantize("bf16", "search")
	opts := qualityVerifyOptions(cp, source)
	if cp.rounding == nil {
		cp.rounding = roundingKLD(t, source, opts)
	}
	var rows []qualityRow
	for _, profile := range []string{"bf16", "q6", "q5", "q4", "nvfp4x", "nvfp4"} {
		for _, enc := range []string{"minmax", "search", "search+imatrix"} {
			if profile == "bf16" && enc != "search" {
				continue // nothing is encoded
			}
			pack := source // the bf16 row: the source against itself
			if profile != "bf16" {
				pack = quantize(profile, enc)
			}
			st, err := os.Stat(filepath.Join(pack, dgq.BlobName))
			if err != nil {
				t.Fatal(err)
			}
			p, err := dgq.Open(pack)
			if err != nil {
				t.Fatal(err)
			}
			var params int64
			for _, tn := range p.Manifest.Tensors {
				m, _ := codecs.FlattenShape(tn.Shape)
				params += m.Elements()
			}
			p.Close()
			r, err := Verify(context.Background(), pack, opts)
			if err != nil {
				t.Fatal(err)
			}
			row := qualityRow{Checkpoint: cp.name, Profile: profile, Encoder: enc, BlobBytes: st.Size(),
				BitsPerWeight: 8 * float64(st.Size()) / float64(params), KLDMean: r.KLD.Mean, KLDP99: r.KLD.P99,
				KLDMax: r.KLD.Max, Top1: r.Top1, AccPack: r.Accuracy.Pack, AccSource: r.Accuracy.Source}
			if cp.rounding != nil && *cp.rounding > 0 {
				v := r.KLD.Mean / *cp.rounding
				row.KLDVsRounding = &v
			}
			if g := r.Generation; g != nil {
				row.StepsPack, row.StepsSrc, row.TokAgree = g.StepsPerBlock.Pack, g.StepsPerBlock.Source, g.TokenAgreement
				row.SettlePack, row.SettleSrc = g.SettleSteps.Pack, g.SettleSteps.Source
			}
			if c := r.Convergence; c != nil {
				row.StepCost, row.StepCostCI95, row.Blocks = c.StepCost, c.StepCostCI95, c.Blocks
			}
			t.Logf("%+v", row)
			rows = append(rows, row)
		}
	}
	return rows
}

func fmtOptional(v *float64, format, none string) string {
	if v == nil {
		return none
	}
	return fmt.Sprintf(format, *v)
}

func writeChart(t *testing.T, path string, img *image.RGBA) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
}

// qualityEncoders are the chart's series, in order.
var qualityEncoders = []string{"search", "minmax", "search+imatrix"}

// qualityChart draws the KLD mean of every quantized pack of one checkpoint
// against its blob size (top: a scatter, KLD on a log axis, one colour per
// encoder, each search point labeled with its profile) and the top-1
// disagreement per profile, the encoders side by side (bottom).
func qualityChart(rows []qualityRow) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, PlotWidth, PlotHeight))
	draw.Draw(img, img.Bounds(), image.NewUniform(plotBG), image.Point{}, draw.Src)
	var dis [][]float64
	var labels []string
	var pts []scatterPoint
	byProfile := map[string][]float64{}
	for _, r := range rows {
		if r.Profile == "bf16" {
			continue
		}
		series := slices.Index(qualityEncoders, r.Encoder)
		pts = append(pts, scatterPoint{X: float64(r.BlobBytes) / 1e6, Y: r.KLDMean, Series: series, Label: strings.ToUpper(r.Profile)})
		if _, ok := byProfile[r.Profile]; !ok {
			labels = append(labels, r.Profile)
			byProfile[r.Profile] = make([]float64, len(qualityEncoders))
		}
		byProfile[r.Profile][series] = 1 - r.Top1
	}
	for i, p := range labels {
		dis = append(dis, byProfile[p])
		labels[i] = strings.ToUpper(p)
	}
	legend := []string{"SEARCH", "MINMAX", "IMATRIX"}
	scatterPanel(img, image.Rect(0, 0, PlotWidth, PlotHeight/2), "KLD MEAN VS BF16 IN NATS (LOG) AGAINST PACK MB", pts, legend)
	plotPanel(img, image.Rect(0, PlotHeight/2, PlotWidth, PlotHeight), "TOP-1 DISAGREEMENT VS BF16", dis, labels, legend)
	return img
}

// scatterPoint is one point of scatterPanel.
type scatterPoint struct {
	X, Y   float64
	Series int
	Label  string
}

// scatterPanel draws points in area: x linear from the smallest to the
// largest X (both labeled, with 5 % margins), y logarithmic over the
// decades the Y values span (each decade labeled and gridded).
func scatterPanel(img *image.RGBA, area image.Rectangle, title string, pts []scatterPoint, legend []string) {
	const scale = plotScale
	panelHeader(img, area, title, legend)
	plot := image.Rect(area.Min.X+80, area.Min.Y+40, area.Max.X-40, area.Max.Y-36)
	if len(pts) == 0 {
		return
	}
	x0, x1 := math.Inf(1), math.Inf(-1)
	d0, d1 := math.Inf(1), math.Inf(-1)
	for _, p := range pts {
		x0, x1 = min(x0, p.X), max(x1, p.X)
		if p.Y > 0 {
			d0, d1 = min(d0, math.Floor(math.Log10(p.Y))), max(d1, math.Ceil(math.Log10(p.Y)))
		}
	}
	if d1 <= d0 {
		d0, d1 = -6, 0
	}
	pad := max((x1-x0)*0.05, 0.05)
	x0, x1 = x0-pad, x1+pad
	px := func(x float64) int { return plot.Min.X + int(float64(plot.Dx())*(x-x0)/(x1-x0)) }
	py := func(y float64) int { return plot.Max.Y - int(float64(plot.Dy())*(math.Log10(y)-d0)/(d1-d0)) }
	for d := d0; d <= d1; d++ {
		y := plot.Max.Y - int(float64(plot.Dy())*(d-d0)/(d1-d0))
		fill(img, image.Rect(plot.Min.X, y, plot.Max.X, y+1), plotGrid)
		l := fmt.Sprintf("1E%d", int(d))
		drawText(img, plot.Min.X-8-textWidth(l, scale), y-5, l, scale, plotInk)
	}
	for _, x := range []float64{x0 + pad, x1 - pad} {
		l := strconv.FormatFloat(x, 'f', 2, 64) + "MB"
		drawText(img, px(x)-textWidth(l, scale)/2, plot.Max.Y+8, strings.ToUpper(l), scale, plotInk)
	}
	for _, p := range pts {
		if !(p.Y > 0) {
			continue
		}
		x, y := px(p.X), py(p.Y)
		fill(img, image.Rect(x-4, y-4, x+5, y+5), plotSeries[p.Series%len(plotSeries)])
		if p.Series == 0 { // one label per profile: the search point's
			drawText(img, x+8, y-5, p.Label, scale, plotInk)
		}
	}
	fill(img, image.Rect(plot.Min.X-1, plot.Min.Y, plot.Min.X+1, plot.Max.Y+1), plotInk)
	fill(img, image.Rect(plot.Min.X-1, plot.Max.Y, plot.Max.X, plot.Max.Y+2), plotInk)
}
