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
// Resolving a snapshot folder from a cache root, a repository id and a
// revision (HF_HOME, HF_HUB_CACHE, refs/<branch>) is not part of this package
// yet; it will sit beside OpenSnapshot and hand it the folder.
//
// Every error wraps one of the sentinels of errors.go and names the file and,
// where there is one, the tensor.
package hfcache
