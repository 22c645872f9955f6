package check

import (
	"context"
	"sync"
	"testing"

	"github.com/dgq-dev/dgq/runtime/internal/fixture"
)

// phaseRecorder is a dgq.Progress that records each phase's total and the
// amount added to it.
type phaseRecorder struct {
	mu     sync.Mutex
	phases []string
	total  map[string]int64
	done   map[string]int64
	cur    string
}

func newPhaseRecorder() *phaseRecorder {
	return &phaseRecorder{total: map[string]int64{}, done: map[string]int64{}}
}

func (p *phaseRecorder) Start(phase string, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cur = phase
	p.phases = append(p.phases, phase)
	p.total[phase] = total
}

func (p *phaseRecorder) Add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done[p.cur] += n
}

func (p *phaseRecorder) Finish() {}

// TestMeasurementProgress: verify counts its windows and bench each timed
// operation's repetitions (warm-up included) on the Steps progress, to the
// total each phase announced.
func TestMeasurementProgress(t *testing.T) {
	pack := fixture.PackDir(t, "tiny", "q4")
	v := newPhaseRecorder()
	if _, err := Verify(context.Background(), pack, quickVerify(VerifyOptions{Source: fixture.PackDir(t, "tiny", "bf16"), Generations: -1, Steps: v})); err != nil {
		t.Fatal(err)
	}
	if v.total["verify"] != 2 || v.done["verify"] != 2 {
		t.Errorf("verify steps: total %d done %d, want 2 windows", v.total["verify"], v.done["verify"])
	}
	b := newPhaseRecorder()
	if _, err := Bench(context.Background(), pack, BenchOptions{PromptLen: 8, Canvas: 8, Reps: 2, Steps: b}); err != nil {
		t.Fatal(err)
	}
	if len(b.phases) < 2 {
		t.Fatalf("bench phases %v", b.phases)
	}
	for _, ph := range b.phases {
		if b.total[ph] != 3 || b.done[ph] != 3 {
			t.Errorf("bench %s: total %d done %d, want 3 (one warm-up, two timed)", ph, b.total[ph], b.done[ph])
		}
	}
}
