// Package hub downloads a model (or pack) repository from the Hugging Face
// Hub into the hub cache, laid out exactly as huggingface_hub's
// snapshot_download lays it out, so that hfcache.ResolveSource, the hf CLI,
// transformers and dgq all find it. Download is the one entry point.
//
// # Protocol
//
// Against the endpoint (HF_ENDPOINT, default https://huggingface.co):
//
//  1. GET /api/models/{org}/{name}/revision/{revision} gives the commit
//     ("sha") of a branch or tag; a 40-hex commit revision skips it.
//  2. GET /api/models/{org}/{name}/tree/{commit}?recursive=true&expand=false
//     lists the files (type, oid, size, path, lfs{oid, size}), paginated
//     by a `Link: <url>; rel="next"` header (ParseNextLink). The listing is
//     kept in <repo folder>/trees/<commit>.json, huggingface_hub's tree
//     cache (ParseTreeCache), and read from there next time.
//  3. GET /{org}/{name}/resolve/{commit}/{path} gives a file's bytes; an
//     LFS file redirects to another host (a CDN), which is followed. The
//     "Authorization: Bearer <token>" header goes to the endpoint's origin
//     (scheme, host and port) only, never to another host. Bytes are asked
//     with "Range: bytes=a-b" to resume or to fetch parts, and with
//     "Accept-Encoding: identity".
//
// Failures carry X-Error-Code and X-Error-Message; APIError maps them as
// huggingface_hub does to ErrRepoNotFound, ErrRevisionNotFound,
// ErrEntryNotFound, ErrGated (whose message says to accept the licence on
// the repo's page and set HF_TOKEN or run `hf auth login`) and ErrAuth.
// Network errors, stalls (no byte for 60 s), truncated bodies and 408, 429
// and 5xx answers are retried with exponential backoff (1 s doubling to
// 8 s, or the server's Retry-After up to 5 min; 5 retries after the last
// progress; a retry resumes with Range where the bytes stopped), then fail
// with ErrNetwork. The token is HF_TOKEN, else HUGGING_FACE_HUB_TOKEN, else the
// token file (HF_TOKEN_PATH, else $HF_HOME/token, else
// $XDG_CACHE_HOME/huggingface/token, else ~/.cache/huggingface/token); it
// never appears in a message.
//
// # Layout
//
// In the hub cache folder that hfcache.CacheRoot picks:
//
//	models--ORG--NAME/blobs/<etag>                     the content; etag = git blob sha1, or sha256 for LFS
//	models--ORG--NAME/blobs/<etag>.incomplete          a partial download (a prefix of the content)
//	models--ORG--NAME/snapshots/<commit>/<path>        a relative symlink to ../../blobs/<etag> (deeper paths: more ../)
//	models--ORG--NAME/refs/<revision>                  the commit, for a branch or tag ("refs/pr/1" as refs/refs/pr/1)
//	models--ORG--NAME/trees/<commit>.json              the listing
//	.locks/models--ORG--NAME/<etag>.lock               the lock taken while a blob is fetched (flock, as huggingface_hub)
//	CACHEDIR.TAG
//
// refs/<revision> is written last, once every selected file is in place,
// so that a ref never points at a snapshot this download left incomplete.
// With Options.LocalDir the files go to DIR/<path> instead, with
// huggingface_hub's local_dir bookkeeping in DIR/.cache/huggingface/
// (download/<path>.metadata holding the commit, the etag and the time;
// download/<dir>/<hash>.<etag>.incomplete for partial files; the tree
// cache; a .gitignore of "*"); a file of the hub cache with the same etag
// is copied instead of fetched. Folders are made 0755 and files 0644;
// nothing is written anywhere else.
//
// # Transfers
//
// Several files are fetched at once, and a file with at least twice
// Options.PartSize (64 MiB) left is split into ranged parts fetched
// concurrently, within Options.Connections (8) requests in flight. Parts
// beyond the prefix land in <etag>.part-<start>.incomplete beside the
// prefix (see transfer.go): names and sizes record exactly what has
// arrived, so an interrupted download (Ctrl-C, a crash, a network failure)
// resumes where every part stopped and fetches nothing twice; a
// <etag>.incomplete left by huggingface_hub is resumed the same way.
// Before a blob is renamed into blobs/ its size and digest are checked
// against the listing: sha256 for an LFS file, sha1("blob <size>\x00" +
// content) for a regular one. A mismatch publishes nothing, removes the
// partial files and fails with ErrCorrupt naming the file. Free space is
// checked first against what is left to fetch (ErrDiskFull). A snapshot
// already complete fetches nothing. Canceling the context stops every
// transfer at once, keeps the partial files for the next run and returns
// an error wrapping context.Canceled.
//
// # Offline
//
// With HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) true, or Options.Offline,
// Download touches no network: it reports the snapshot the cache already
// holds (the revision through refs/, the listing from the tree cache, every
// selected file checked present) and fails with ErrOffline otherwise;
// without a cached listing it cannot tell completeness and reports what is
// there (Result.Complete false).
package hub
