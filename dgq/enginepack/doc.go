// Package enginepack is an independent model of the original engine's .dgq
// pack writer (mmastrac/diffgemma, the Rust engine dgq descends from). It
// exists for dgq's tests only: a pack written here stands in for a pack
// written by the engine, so tests can prove that dgq reads what the engine
// writes, and that `dgq quantize --encoder minmax` produces the engine's
// bytes.
//
// The package was written from the recorded facts about the engine's format
// (docs/format.md, and the engine's codec vectors under
// testdata/engine-codec-vectors), not from dgq's own writer. To keep the two
// from sharing a mistake it imports nothing from this module: only the
// standard library.
//
// What it models:
//
//   - a minimal safetensors snapshot reader (ReadSnapshot);
//   - the engine's min/max encoders for q4_block, q6_block, q8_row and
//     nvfp4_block, bit-exact (EncodeTensor, EncodeMatrix);
//   - the engine's tensor classification, --set classes and dimension checks
//     (Classify, ClassOf, ClassifyCustom, ValidateFormatDims);
//   - the writer (Write): blob order and alignment, self-contained and
//     layered (overlay) packs, the manifest exactly as the engine serializes
//     it (MarshalManifest), and knobs that emulate older engine versions.
//
// Everything here favours being obviously right over being fast: snapshots
// are read into memory and encoders are plain loops.
package enginepack
