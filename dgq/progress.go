package dgq

import "sync"

// Progress receives progress of long operations. The library calls Start
// once per phase with the phase's total (bytes), Add as work completes, and
// Finish when the phase ends. Implementations must be safe for use from one
// goroutine at a time (the library never calls them concurrently).
type Progress interface {
	Start(phase string, total int64)
	Add(n int64)
	Finish()
}

type nopProgress struct{}

func (nopProgress) Start(string, int64) {}
func (nopProgress) Add(int64)           {}
func (nopProgress) Finish()             {}

// ProgressOrNop returns p, or a Progress that ignores everything when p is nil.
func ProgressOrNop(p Progress) Progress {
	if p == nil {
		return nopProgress{}
	}
	return p
}

// lockedProgress serializes the calls of concurrent workers into a Progress
// that must be called from one goroutine at a time.
type lockedProgress struct {
	mu sync.Mutex
	p  Progress
}

func (l *lockedProgress) Start(phase string, total int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.p.Start(phase, total)
}

func (l *lockedProgress) Add(n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.p.Add(n)
}

func (l *lockedProgress) Finish() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.p.Finish()
}
