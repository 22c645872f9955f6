// Package hfcache reads Hugging Face checkpoints as they lie on disk: the
// safetensors file format and the snapshot folders of the Hugging Face hub
// cache.
//
// A snapshot folder (for example
// <cache>/models--org--name/snapshots/<commit>/, or any plain folder holding
// the same files) contains either model.safetensors.index.json and the shards
// it names, or a single model.safetensors. OpenSnapshot maps every shard
// read-only (following the relative symlinks the hub cache places in
// snapshots/ pointing into blobs/), validates every header and cross-checks
// the index against the shards, without reading any weight bytes. Tensor
// bytes are then slices of the read-only mappings; Shard.Release and
// Shard.WillNeed let a streaming reader keep its resident memory flat.
//
// Safetensors headers are validated strictly (ParseHeader): the structural
// rules (header size cap, offsets contiguous from 0 with no holes, dtype ×
// shape = byte size, data ending exactly at the end of the file) are checked
// by github.com/nlpodyssey/safetensors, and a pre-scan of the header JSON
// covers what that library does not: duplicate tensor names, dtypes dgq
// cannot read (reported by name), bounds on header length, tensor count and
// rank, integers that do not fit int64 and a malformed __metadata__.
//
// # Hub cache resolution
//
// ResolveSource turns what a user passes to -m into the snapshot folder
// that OpenSnapshot reads: an existing folder is used as is (Detect fills
// in the repo and commit when it lies in a hub cache), anything else must
// be "org/name[@revision]" (ParseRepoRef) and is looked up by Resolve in
// the hub cache folder that CacheRoot picks, the first of:
//
//  1. DGQ_HF_HOME: the hub cache folder itself (the one holding
//     models--ORG--NAME/), for dgq only;
//  2. HF_HUB_CACHE: the hub cache folder itself;
//  3. HUGGINGFACE_HUB_CACHE: the same, legacy name;
//  4. $HF_HOME/hub;
//  5. $XDG_CACHE_HOME/huggingface/hub;
//  6. ~/.cache/huggingface/hub.
//
// Empty variables count as unset; a leading "~" is expanded. In that
// folder, org/name lives in models--org--name/; the revision (default
// "main") is a branch or tag when refs/<revision> exists (a file holding
// the 40-hex commit; "refs/pr/1" is stored as refs/refs/pr/1), or else
// must be a full lower-case 40-hex commit; the snapshot folder
// snapshots/<commit>/ must exist. Its entries are relative symlinks into
// blobs/, or real files when the cache was written with
// HF_HUB_DISABLE_SYMLINKS; both are read the same way.
//
// A missing repo, revision or snapshot folder fails with ErrNotInCache and
// a missing or dangling file in a snapshot with ErrMissingFile; both
// messages end with the exact fix, "dgq download ORG/NAME --revision REV",
// with "--include FILE" when the missing file is known (DownloadHint,
// Resolved.HintFor). IsInCache tells whether a path lies in the hub cache,
// where dgq never writes. StaleError (wrapping ErrStale) reports a pinned
// external file that is missing or has changed.
//
// Every error wraps one of the sentinels of errors.go and names the file and,
// where there is one, the tensor.
package hfcache
