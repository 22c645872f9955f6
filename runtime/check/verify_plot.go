package check

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dgq-dev/dgq/dgq"
)

// The chart of `dgq verify --plot`: a PNG drawn with the standard library,
// two bar panels — the relative error of each hidden state (top) and the
// mean KLD at each noise rate without and with self-conditioning (bottom) —
// labeled with a built-in 3×5 pixel font.

// Plot geometry.
const (
	PlotWidth  = 800
	PlotHeight = 520
)

var (
	plotBG     = color.RGBA{255, 255, 255, 255}
	plotInk    = color.RGBA{40, 40, 40, 255}
	plotGrid   = color.RGBA{222, 222, 222, 255}
	plotBlue   = color.RGBA{52, 112, 176, 255}
	plotOrange = color.RGBA{224, 123, 40, 255}
	plotGreen  = color.RGBA{62, 150, 81, 255}
)

// checkPlotPath refuses, before any work, a plot path that is not a .png,
// is a directory, lies inside the pack, the source or a Hugging Face cache,
// or cannot be created (dgq.CheckReportPath's rules).
func checkPlotPath(path, pack, source string) error {
	if strings.ToLower(filepath.Ext(path)) != ".png" {
		return fmt.Errorf("%w: --plot %s: the chart is a PNG; give a path ending in .png", ErrVerifyOptions, path)
	}
	return dgq.CheckOutputFile("--plot", path, source, pack)
}

// writePlot draws rep's chart and writes it to path atomically (a
// temporary file beside it, renamed).
func writePlot(path string, rep *VerifyReport) (err error) {
	img := plotImage(rep)
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("verify: --plot: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := png.Encode(f, img); err != nil {
		return fmt.Errorf("verify: --plot %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("verify: --plot %s: %w", path, err)
	}
	if err := os.Chmod(f.Name(), dgq.PublicMode(dgq.FileMode)); err != nil { // 0644 less the umask
		return fmt.Errorf("verify: --plot %s: %w", path, err)
	}
	return os.Rename(f.Name(), path)
}

// plotImage draws the two panels.
func plotImage(rep *VerifyReport) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, PlotWidth, PlotHeight))
	draw.Draw(img, img.Bounds(), image.NewUniform(plotBG), image.Point{}, draw.Src)
	var rel [][]float64
	var layers []string
	for _, l := range rep.Layers {
		rel = append(rel, []float64{l.RelErr})
		layers = append(layers, strconv.Itoa(l.Layer))
	}
	plotPanel(img, image.Rect(0, 0, PlotWidth, PlotHeight/2), "HIDDEN STATE REL ERR PER LAYER", rel, layers, nil)
	var kld [][]float64
	var rates []string
	for i := 0; i+1 < len(rep.PerNoise); i += 2 {
		kld = append(kld, []float64{rep.PerNoise[i].KLDMean, rep.PerNoise[i+1].KLDMean})
		rates = append(rates, strconv.FormatFloat(rep.PerNoise[i].Rate, 'g', 3, 64))
	}
	plotPanel(img, image.Rect(0, PlotHeight/2, PlotWidth, PlotHeight), "KLD MEAN BY NOISE RATE", kld, rates, []string{"SC OFF", "SC ON"})
	return img
}

// plotPanel draws one bar panel in area: a title, a y axis from 0 to the
// largest value (both labeled) with quarter grid lines, and per group one
// bar per series, labeled below. legend names the series (nil: none).
func plotPanel(img *image.RGBA, area image.Rectangle, title string, groups [][]float64, labels, legend []string) {
	const scale = plotScale
	panelHeader(img, area, title, legend)
	plot := image.Rect(area.Min.X+80, area.Min.Y+40, area.Max.X-20, area.Max.Y-36)
	top := 0.0
	for _, g := range groups {
		for _, v := range g {
			top = max(top, v)
		}
	}
	if top <= 0 {
		top = 1
	}
	for q := 1; q <= 4; q++ {
		y := plot.Max.Y - q*plot.Dy()/4
		fill(img, image.Rect(plot.Min.X, y, plot.Max.X, y+1), plotGrid)
	}
	topLabel := strings.ToUpper(strconv.FormatFloat(top, 'g', 3, 64))
	drawText(img, plot.Min.X-8-textWidth(topLabel, scale), plot.Min.Y-5, topLabel, scale, plotInk)
	drawText(img, plot.Min.X-8-textWidth("0", scale), plot.Max.Y-5, "0", scale, plotInk)
	if n := len(groups); n > 0 {
		slot := plot.Dx() / n
		every := 1 // label every k-th group when the labels do not fit
		for every*slot < textWidth(labels[n-1], scale)+6 {
			every++
		}
		for i, g := range groups {
			x0 := plot.Min.X + i*slot + slot/8
			w := max((slot*3/4)/len(g), 1)
			for j, v := range g {
				h := int(float64(plot.Dy()) * max(v, 0) / top)
				fill(img, image.Rect(x0+j*w, plot.Max.Y-h, x0+(j+1)*w, plot.Max.Y), plotSeries[j%len(plotSeries)])
			}
			if i%every == 0 {
				cx := plot.Min.X + i*slot + slot/2
				drawText(img, cx-textWidth(labels[i], scale)/2, plot.Max.Y+8, labels[i], scale, plotInk)
			}
		}
	}
	fill(img, image.Rect(plot.Min.X-1, plot.Min.Y, plot.Min.X+1, plot.Max.Y+1), plotInk)
	fill(img, image.Rect(plot.Min.X-1, plot.Max.Y, plot.Max.X, plot.Max.Y+2), plotInk)
}

// plotScale is the text scale of the panels; plotSeries the series colours.
const plotScale = 2

var plotSeries = []color.RGBA{plotBlue, plotOrange, plotGreen}

// panelHeader draws a panel's title (top left) and the legend of its
// series (top right; nil: none).
func panelHeader(img *image.RGBA, area image.Rectangle, title string, legend []string) {
	drawText(img, area.Min.X+12, area.Min.Y+12, title, plotScale, plotInk)
	for i, name := range legend {
		x := area.Max.X - 100*len(legend) + i*100
		fill(img, image.Rect(x, area.Min.Y+12, x+10, area.Min.Y+22), plotSeries[i%len(plotSeries)])
		drawText(img, x+16, area.Min.Y+12, name, plotScale, plotInk)
	}
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	draw.Draw(img, r, image.NewUniform(c), image.Point{}, draw.Src)
}

// plotFont is a 3×5 pixel font: each glyph's 15 pixels row by row, top
// first ('1' set). Characters it lacks are drawn as blanks.
var plotFont = map[rune]string{
	'0': "111101101101111", '1': "010110010010111", '2': "111001111100111", '3': "111001111001111",
	'4': "101101111001001", '5': "111100111001111", '6': "111100111101111", '7': "111001010010010",
	'8': "111101111101111", '9': "111101111001111", '.': "000000000000010", '-': "000000111000000",
	'+': "000010111010000", 'A': "010101111101101", 'B': "110101110101110", 'C': "011100100100011",
	'D': "110101101101110", 'E': "111100110100111", 'F': "111100110100100", 'H': "101101111101101",
	'I': "111010010010111", 'K': "101101110101101", 'L': "100100100100111", 'M': "101111111101101",
	'N': "110101101101101", 'O': "010101101101010", 'P': "110101110100100", 'R': "110101110101101",
	'S': "011100010001110", 'T': "111010010010010", 'V': "101101101101010", 'Y': "101101010010010",
	'X': "101101010101101", 'Z': "111001010100111", 'G': "011100101101011", 'U': "101101101101111",
	'Q': "010101101110011", 'W': "101101111111101", 'J': "001001001101010", '(': "010100100100010",
	')': "010001001001010", '/': "001001010100100",
}

// drawText draws s with its top-left corner at (x, y), each font pixel a
// scale×scale square, glyphs 4 font pixels apart.
func drawText(img *image.RGBA, x, y int, s string, scale int, c color.RGBA) {
	for i, r := range []rune(s) {
		g := plotFont[r]
		for p, bit := range g {
			if bit != '1' {
				continue
			}
			px, py := x+(i*4+p%3)*scale, y+(p/3)*scale
			fill(img, image.Rect(px, py, px+scale, py+scale), c)
		}
	}
}

// textWidth is the width of s drawn at scale.
func textWidth(s string, scale int) int {
	n := len([]rune(s))
	if n == 0 {
		return 0
	}
	return (n*4 - 1) * scale
}
