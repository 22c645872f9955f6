package dgq_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/runtime/check"
)

// A real dgq verify report of the pack (runtime/check's VerifyReport, as
// `dgq verify --json` prints it) goes into the card: its KL divergence,
// top-1 agreement, per-noise rows and generation numbers appear, and the
// pack still audits clean.
func TestCardWithVerifyReport(t *testing.T) {
	cardHub(t, baseCard)
	pack := cardPack(t, "q4", false)
	rep, err := check.Verify(context.Background(), pack, check.VerifyOptions{Windows: 2, Prefix: 8, Generations: 1, GenSteps: 4})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(t.TempDir(), "verify.json")
	if err := os.WriteFile(report, b, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := dgq.Card(dgq.CardOptions{Pack: pack, VerifyReport: report})
	if err != nil {
		t.Fatal(err)
	}
	if !res.VerifyIncluded || len(res.Notes) != 0 {
		t.Errorf("verify included %v, notes %q", res.VerifyIncluded, res.Notes)
	}
	doc := readCard(t, pack)
	_, body := splitCard(t, doc)
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }
	for _, w := range []string{
		"| KL divergence, mean | " + num(rep.KLD.Mean) + " |",
		"| KL divergence, p99 | " + num(rep.KLD.P99) + " |",
		"| KL divergence, p99.9 | " + num(rep.KLD.P999) + " |",
		"| top-1 agreement | " + strconv.FormatFloat(rep.Top1, 'f', 4, 64) + " |",
		"| seeded generations identical | ",
		"| denoising steps per block, base / pack | ",
		"| 0.25 | off | " + num(rep.PerNoise[0].KLDMean) + " |",
		"pseudo-random tokens",
		"Notes of the run:",
		"and a `dgq verify` report.",
	} {
		if !strings.Contains(body, w) {
			t.Errorf("body lacks %q:\n%s", w, body)
		}
	}
	if !(rep.KLD.Mean > 0) {
		t.Errorf("a q4 pack with KLD mean %v", rep.KLD.Mean)
	}
	if strings.Contains(string(doc), rep.Source) {
		t.Error("the card holds the report's local source path")
	}
	auditClean(t, pack)
}
