// Package check proves what a pack computes: Parity (the transformers
// reference scenarios, and on a GPU the same scenarios against the CPU
// backend), Smoke (a fixed battery), Bench (timed prefill and generation
// steps) and GenerateLockstep (a generation compared step by step with the
// CPU backend, every disagreement classified).
package check
