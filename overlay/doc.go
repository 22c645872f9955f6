// Package overlay gives layered (overlay) packs their meaning: it resolves
// Local and External sources, checks the pins of external Hugging Face
// shards, assembles the canonical address space every consumer reads (the
// loader: Open), audits layered packs through that view, and converts
// between layered and self-contained packs (RepackOverlay, RepackMonolithic).
//
// Loading a layered pack maps the expert tail [expert_split, blob_size)
// straight from the local blob at local_expert_split (never copied) and
// gather-copies the head [0, expert_split) into one anonymous mapping: raw
// tensors from the pinned shards, quantized ones from the local blob. Both
// regions form one contiguous range, so a layered pack is, to its consumers,
// indistinguishable from a self-contained one.
package overlay
