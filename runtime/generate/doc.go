// Package generate is transformers' block-diffusion generation loop
// (MODEL_SPEC §4): generation_config.json (Config), the block and step
// schedule, the temperature, the entropy-bound accept mask, the stop rules,
// the seeded RNG, and the seed engine's deliberate divergences as named
// Options. The loop drives a Stepper — an Engine's (NewStepper) in
// production — so the host keeps only the lengths, the RNG and the rules.
package generate
