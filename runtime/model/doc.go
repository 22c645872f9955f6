// Package model binds a pack to DiffusionGemma's text model and runs it.
//
//   - Bind checks a loaded pack strictly against its config.json (every
//     missing, unexpected, misshapen or undecodable tensor in one
//     *BindError) and returns a Model: the stored tensors, the small
//     vectors decoded once, the rotary frequencies. A Model computes
//     nothing.
//   - NewEngine uploads a Model to a backend.Backend; the Engine is the one
//     orchestration of the forward pass (MODEL_SPEC §3), whatever the
//     hardware: Prefill (the causal encoder, appending K/V to a Cache),
//     Denoise (one bidirectional decoder step over a canvas, optionally
//     self-conditioned), and Step (a generation step: the forward, then
//     temper, entropy, argmax and the categorical draws on the backend).
//
// The arithmetic is the backend's: package cpu's reference matches
// transformers to float32 precision; other backends are held to it by
// runtime/conformance and the checks of runtime/check.
package model
