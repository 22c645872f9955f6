package check

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"os"
	"path/filepath"
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
	TokAgree  float64 `json:"generation_token_agreement"`
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
			}
			t.Logf("%+v", row)
			rows = append(rows, row)
		}
	}
	var md strings.Builder
	md.WriteString("| profile | encoder | blob MB | KLD mean | KLD p99 | KLD max | top-1 | accuracy (pack / bf16) | steps per block (pack / bf16) | generated tokens equal |\n")
	md.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&md, "| %s | %s | %.2f | %.3g | %.3g | %.3g | %.4f | %.4f / %.4f | %.1f / %.1f | %.3f |\n", r.Profile, r.Encoder,
			float64(r.BlobBytes)/1e6, r.KLDMean, r.KLDP99, r.KLDMax, r.Top1, r.AccPack, r.AccSource, r.StepsPack, r.StepsSrc, r.TokAgree)
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

// qualityChart draws KLD mean and top-1 disagreement per quantized profile,
// search and minmax side by side, profiles in order of pack size.
func qualityChart(rows []qualityRow) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, PlotWidth, PlotHeight))
	draw.Draw(img, img.Bounds(), image.NewUniform(plotBG), image.Point{}, draw.Src)
	var kld, dis [][]float64
	var labels []string
	for i := 0; i+1 < len(rows); i++ {
		a, b := rows[i], rows[i+1]
		if a.Profile != b.Profile {
			continue
		}
		kld = append(kld, []float64{a.KLDMean, b.KLDMean})
		dis = append(dis, []float64{1 - a.Top1, 1 - b.Top1})
		labels = append(labels, strings.ToUpper(fmt.Sprintf("%s %.1fMB", a.Profile, float64(a.BlobBytes)/1e6)))
		i++
	}
	legend := []string{"SEARCH", "MINMAX"}
	plotPanel(img, image.Rect(0, 0, PlotWidth, PlotHeight/2), "KLD MEAN VS BF16 (NATS)", kld, labels, legend)
	plotPanel(img, image.Rect(0, PlotHeight/2, PlotWidth, PlotHeight), "TOP-1 DISAGREEMENT VS BF16", dis, labels, legend)
	return img
}
