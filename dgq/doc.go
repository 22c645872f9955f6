// Package dgq is the .dgq pack format and the quantizer that writes it.
//
// A pack is a directory holding a JSON manifest (ManifestName), one blob file
// (BlobName) and the config/tokenizer files copied from the source snapshot.
// Every tensor has a canonical, 64-byte-aligned offset in the blob; expert
// tensors come last, from ExpertSplit (a multiple of 16 KiB). Raw tensors are
// the source bytes verbatim; every other format is a codecs transform. Each
// tensor carries a BLAKE3 digest of its bytes. docs/format.md is the
// normative specification.
//
// Quantize runs in three steps: Inventory (open the snapshot and read every
// header, no weight bytes), Plan (layout.MakePlan decides every format and
// offset as plain data) and Execute (encode tensors in parallel, write them
// with positional writes, hash them while writing, publish atomically).
//
// Open validates a pack's manifest against every rule (Validate) before any
// consumer reads a byte; Audit additionally verifies every digest and lists
// all findings.
package dgq
