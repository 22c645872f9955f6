package backend

import "context"

// Cancelable is an optional interface of a Backend whose ops may each run
// for long on the calling goroutine: the CPU backend computes every op
// before returning, and at the real model's shapes one product with the
// 262144-row lm_head, or one soft embedding over the vocabulary, takes tens
// of seconds on two cores. An asynchronous backend (CUDA, Metal) queues its
// ops in microseconds and does not need it: model.Engine checks its context
// between ops and synchronizes before it returns on cancellation.
//
// Between SetContext(ctx) and SetContext(nil), an op that finds ctx done
// stops between units of its work (bands of weight rows, groups of
// positions, experts) and returns an error that wraps ctx.Err();
// what the op was writing is then undefined. model.Engine sets the context
// for the span of each Prefill, Denoise and Step. Like every other method,
// SetContext must not be called concurrently with an op.
type Cancelable interface {
	SetContext(ctx context.Context)
}

// SetContext forwards to the wrapped backend when it is Cancelable.
func (p *Profiled) SetContext(ctx context.Context) {
	if c, ok := p.Backend.(Cancelable); ok {
		c.SetContext(ctx)
	}
}
