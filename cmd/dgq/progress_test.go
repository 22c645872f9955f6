package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"
)

// visibleBar is a visible progress bar writing to a buffer, on a terminal
// of the given width (≤ 0: one that does not tell).
func visibleBar(columns int, counts bool) (*barProgress, *bytes.Buffer) {
	var out bytes.Buffer
	return &barProgress{out: &out, visible: true, counts: counts, columns: func() int { return columns }}, &out
}

// lastBarLine is the last line drawn (the text after the last carriage return
// that is not only an erase).
func lastBarLine(out string) string {
	parts := strings.Split(out, "\r")
	for i := len(parts) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(strings.TrimSuffix(parts[i], "\x1b[K")); l != "" {
			return l
		}
	}
	return ""
}

// TestProgressBar: nothing is drawn in a phase's first second (no rate
// measured over microseconds), then the bar shows the amount, a sane rate
// and a real width whatever the terminal says (unknown, 0), and is erased
// at the end; an invisible bar (stderr not a terminal) writes nothing.
func TestProgressBar(t *testing.T) {
	bar := regexp.MustCompile(`\|([^|]*)\|`)
	for _, cols := range []int{0, -1} {
		p, out := visibleBar(cols, false)
		p.Start("quantize", 100<<20)
		p.Add(30 << 20) // 30 MiB within the first instant
		if out.Len() != 0 {
			t.Errorf("columns %d: drawn within the first second: %q", cols, out.String())
		}
		time.Sleep(rateAfter + 50*time.Millisecond)
		p.Add(20 << 20)
		line := lastBarLine(out.String())
		m := bar.FindStringSubmatch(line)
		if m == nil || len([]rune(m[1])) < 10 {
			t.Fatalf("columns %d: no bar of a real width: %q", cols, line)
		}
		if !strings.Contains(line, "50%") || !strings.Contains(line, "50/100 MiB") {
			t.Errorf("columns %d: amount: %q", cols, line)
		}
		rate := regexp.MustCompile(`([0-9.]+) ([KMGT]i?B)/s`).FindStringSubmatch(line)
		if rate == nil || rate[2] == "TiB" || rate[2] == "GiB" {
			t.Errorf("columns %d: rate of 50 MiB over a second: %q", cols, line)
		}
		p.Finish()
		if l := out.String(); !strings.HasSuffix(strings.TrimRight(l, " "), "\r") && !strings.HasSuffix(l, "\r\x1b[K") {
			t.Errorf("columns %d: the line is not cleared at the end: %q", cols, l[max(0, len(l)-40):])
		}
	}
	p, out := visibleBar(80, false)
	p.visible = false
	p.Start("x", 10)
	time.Sleep(rateAfter + 50*time.Millisecond)
	p.Add(5)
	p.Finish()
	if out.Len() != 0 {
		t.Errorf("invisible bar wrote %q", out.String())
	}
}

// TestHumanBytes: sizes for people, and singular or plural counts.
func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.00 KiB", 1536: "1.50 KiB", 1 << 20: "1.00 MiB",
		1097728: "1.05 MiB", 4194304: "4.00 MiB", 13_600_000_000: "12.7 GiB", 512 << 30: "512 GiB", 3 << 40: "3.00 TiB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[int]string{0: "0 layers", 1: "1 layer", 2: "2 layers"} {
		if got := plural(n, "layer", "layers"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
}
