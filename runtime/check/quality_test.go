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
	"strconv"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/runtime/internal/fixture"
)

// qualityRow is one pack of the quality table.
type qualityRow struct {
	Profile   string  `json:"profile"`
	Encoder   string  `json:"encoder"`
	BlobBytes int64   `json:"blob_bytes"`
	KLDMean   float64 `json:"kld_mean"`
	KLDP99    float64 `json:"kld_p99"`
	KLDMax    float64 `json:"kld_max"`
	Top1      float64 `json:"top1_agreement"`
	AccPack   float64 `json:"accuracy_pack"`
	AccSource float64 `json:"accuracy_source"`
	StepsPack float64 `json:"steps_per_block_pack"`
	StepsSrc  float64 `json:"steps_per_block_source"`
	// SettlePack and SettleSrc: the step after which a block's argmax canvas
	// no longer changed (VerifyGeneration.SettleSteps).
	SettlePack float64 `json:"settle_steps_pack"`
	SettleSrc  float64 `json:"settle_steps_source"`
	TokAgree   float64 `json:"generation_token_agreement"`
}

// TestQualityTable measures docs/quality.md: every profile of the trained
// checkpoint, with both encoders, against its bf16 pack on the held-out
// text (check.Verify), and writes quality.json, quality-table.md (the table) and
// quality.png (the chart) into $DGQ_QUALITY_OUT:
//
//	DGQ_QUALITY_OUT=$PWD/docs go test ./runtime/check -run TestQualityTable -v -timeout 30m
func TestQualityTable(t *testing.T) {
	out := os.Getenv("DGQ_QUALITY_OUT")
	if out == "" {
		t.Skip("set DGQ_QUALITY_OUT=DIR to measure the quality table")
	}
	src := fixture.SnapshotDir(t, "trained")
	text := filepath.Join("..", "..", "testdata", "trained", "heldout.txt")
	dir := t.TempDir()
	quantize := func(profile string, enc codecs.Method) string {
		p := filepath.Join(dir, profile+"-"+enc.String())
		if _, err := dgq.Quantize(context.Background(), dgq.QuantizeOptions{Source: src, Out: p, Profile: profile, Encoder: enc}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	source := quantize("bf16", codecs.Search)
	var rows []qualityRow
	for _, profile := range []string{"bf16", "q6", "q5", "q4", "nvfp4x", "nvfp4"} {
		for _, enc := range []codecs.Method{codecs.Search, codecs.MinMax} {
			if profile == "bf16" && enc == codecs.MinMax {
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
			r, err := Verify(context.Background(), pack, VerifyOptions{Source: source, Text: text, Windows: 16, Generations: 4})
			if err != nil {
				t.Fatal(err)
			}
			row := qualityRow{Profile: profile, Encoder: enc.String(), BlobBytes: st.Size(), KLDMean: r.KLD.Mean,
				KLDP99: r.KLD.P99, KLDMax: r.KLD.Max, Top1: r.Top1, AccPack: r.Accuracy.Pack, AccSource: r.Accuracy.Source}
			if g := r.Generation; g != nil {
				row.StepsPack, row.StepsSrc, row.TokAgree = g.StepsPerBlock.Pack, g.StepsPerBlock.Source, g.TokenAgreement
				row.SettlePack, row.SettleSrc = g.SettleSteps.Pack, g.SettleSteps.Source
			}
			t.Logf("%+v", row)
			rows = append(rows, row)
		}
	}
	var md strings.Builder
	md.WriteString("| profile | encoder | blob MB | KLD mean | KLD p99 | KLD max | top-1 | accuracy (pack / bf16) | steps per block (pack / bf16) | settled at step (pack / bf16) | generated tokens equal |\n")
	md.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&md, "| %s | %s | %.2f | %.3g | %.3g | %.3g | %.4f | %.4f / %.4f | %.1f / %.1f | %.1f / %.1f | %.3f |\n", r.Profile, r.Encoder,
			float64(r.BlobBytes)/1e6, r.KLDMean, r.KLDP99, r.KLDMax, r.Top1, r.AccPack, r.AccSource, r.StepsPack, r.StepsSrc,
			r.SettlePack, r.SettleSrc, r.TokAgree)
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
	f, err := os.Create(filepath.Join(out, "quality.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, qualityChart(rows)); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + md.String())
}

// qualityChart draws the KLD mean of every quantized pack against its
// blob size (top: a scatter, KLD on a log axis, search and minmax in their
// colours, each point labeled with its profile) and the top-1
// disagreement per profile, search and minmax side by side (bottom).
func qualityChart(rows []qualityRow) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, PlotWidth, PlotHeight))
	draw.Draw(img, img.Bounds(), image.NewUniform(plotBG), image.Point{}, draw.Src)
	var dis [][]float64
	var labels []string
	var pts []scatterPoint
	for i, r := range rows {
		if r.Profile == "bf16" {
			continue
		}
		pts = append(pts, scatterPoint{X: float64(r.BlobBytes) / 1e6, Y: r.KLDMean, Series: boolIndex(r.Encoder != "search"),
			Label: strings.ToUpper(r.Profile)})
		if i+1 < len(rows) && rows[i+1].Profile == r.Profile {
			dis = append(dis, []float64{1 - r.Top1, 1 - rows[i+1].Top1})
			labels = append(labels, strings.ToUpper(r.Profile))
		}
	}
	legend := []string{"SEARCH", "MINMAX"}
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
