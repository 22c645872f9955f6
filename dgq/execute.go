package dgq

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/zeebo/blake3"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/layout"
)

// blobFile is what the writer needs of the blob file. It is an interface so
// tests can inject I/O faults (see createBlob).
type blobFile interface {
	io.WriterAt
	Truncate(size int64) error
	Sync() error
	Close() error
}

// createBlob creates the blob file; tests replace it to inject faults.
var createBlob = func(path string) (blobFile, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
}

// guardFault runs f and turns a memory fault while reading a mapped source
// (a shard truncated or unreadable under us: SIGBUS/SIGSEGV on the mapping)
// into an error instead of a crash.
func guardFault(what string, f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(interface{ Addr() uintptr }); !ok {
				panic(r)
			}
			err = fmt.Errorf("%w: reading %s failed (the file changed or an I/O error occurred while it was mapped): %v", ErrSource, what, r)
		}
	}()
	return f()
}

// chunkElements is the target number of elements encoded by one work item.
const chunkElements = 1 << 20

// rawChunkBytes is the size of one verbatim copy step.
const rawChunkBytes = 8 << 20

// TensorStats is the measured error of one written tensor.
type TensorStats struct {
	Name   string
	Class  layout.Class
	Format codecs.Format
	Stats  codecs.Stats
	// Unreached counts the matrices an imatrix had no rows for (encoded
	// with uniform weights); 0 without an imatrix.
	Unreached int
}

// executor writes the planned tensors into the blob. It decides nothing: the
// plan says what goes where, and place says at which offset of the blob file
// each entry's bytes go (skip: the bytes are only checked and hashed, as for
// the raw tensors an overlay pack references instead of copying).
type executor struct {
	blob    io.WriterAt
	workers int
	method  codecs.Method
	imatrix *Imatrix // nil: unweighted search
	// unreached is the last encoded tensor's count of matrices the imatrix
	// had no rows for (tensors are encoded one after the other)
	unreached int
	progress  Progress
	place     func(e layout.Entry) (off int64, skip bool)
}

// run writes every entry of the plan and returns the manifest entries (with
// digests and canonical offsets) and error statistics, in plan order.
func (x *executor) run(ctx context.Context, plan *layout.Plan, refs map[string]hfcache.TensorRef) ([]Tensor, []TensorStats, error) {
	tensors := make([]Tensor, len(plan.Entries))
	stats := make([]TensorStats, len(plan.Entries))
	for i, e := range plan.Entries {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		ref := refs[e.Name]
		// Start the kernel reading this tensor and the next one ahead of the
		// workers (large sequential read-ahead instead of page-sized faults).
		if i == 0 {
			ref.Shard.WillNeed(ref.Offset, ref.Size)
		}
		if i+1 < len(plan.Entries) {
			next := refs[plan.Entries[i+1].Name]
			next.Shard.WillNeed(next.Offset, next.Size)
		}
		var (
			digest string
			st     codecs.Stats
			err    error
		)
		off, skip := e.Offset, false
		if x.place != nil {
			off, skip = x.place(e)
		}
		// Source pages are dropped from the mapping as soon as they are
		// consumed, so resident memory stays at a few chunks whatever the
		// tensor's size (the page cache keeps them for a second pass).
		release := func(pos, n int64) { ref.Shard.Release(ref.Offset+pos, n) }
		if e.Format == codecs.Raw {
			digest, st, err = x.writeRaw(ctx, e, ref.Bytes(), off, skip, release)
		} else {
			x.unreached = 0
			digest, st, err = x.writeEncoded(ctx, e, ref.Bytes(), off, release)
		}
		ref.Shard.Release(ref.Offset, ref.Size)
		if err != nil {
			return nil, nil, err
		}
		tensors[i] = Tensor{Name: e.Name, Class: e.Class, Format: e.Format, DType: e.DType, Shape: e.Shape, Offset: e.Offset, Size: e.Size, Digest: digest}
		stats[i] = TensorStats{Name: e.Name, Class: e.Class, Format: e.Format, Stats: st}
		if e.Format != codecs.Raw {
			stats[i].Unreached = x.unreached
		}
	}
	return tensors, stats, nil
}

// writeRaw copies the source bytes verbatim to off (unless skip), refusing
// non-finite values. Chunks are checked and written by the workers
// (positional writes, any order) while the calling goroutine hashes them in
// order, so hashing — the sequential part — overlaps the rest.
func (x *executor) writeRaw(ctx context.Context, e layout.Entry, src []byte, off int64, skip bool, release func(pos, n int64)) (string, codecs.Stats, error) {
	if int64(len(src)) != e.Size {
		return "", codecs.Stats{}, fmt.Errorf("%w: tensor %s: source holds %d bytes, plan expects %d", ErrSource, e.Name, len(src), e.Size)
	}
	h := blake3.New()
	n := (len(src) + rawChunkBytes - 1) / rawChunkBytes
	chunk := func(i int) []byte { return src[i*rawChunkBytes : min((i+1)*rawChunkBytes, len(src))] }
	work := func(i int) chunkResult {
		c := chunk(i)
		err := guardFault("tensor "+e.Name, func() error {
			if err := codecs.CheckFinite(e.DType, c); err != nil {
				return fmt.Errorf("%w: tensor %s: %w", ErrSource, e.Name, err)
			}
			if !skip {
				if _, err := x.blob.WriteAt(c, off+int64(i*rawChunkBytes)); err != nil {
					return fmt.Errorf("dgq: write tensor %s: %w", e.Name, err)
				}
			}
			return nil
		})
		return chunkResult{idx: i, err: err}
	}
	commit := func(r chunkResult) error {
		c := chunk(r.idx)
		if err := guardFault("tensor "+e.Name, func() error { h.Write(c); return nil }); err != nil {
			return err
		}
		release(int64(r.idx*rawChunkBytes), int64(len(c)))
		x.progress.Add(int64(len(c)))
		return nil
	}
	if err := x.ordered(ctx, n, work, commit); err != nil {
		return "", codecs.Stats{}, err
	}
	return hex.EncodeToString(h.Sum(nil)), codecs.Stats{N: int64(len(src) / max(e.DType.Size(), 1))}, nil
}

type chunkResult struct {
	idx   int
	r0, n int64
	bytes []byte // the encoded span of rows r0..r0+n
	stats codecs.Stats
	err   error
}

// writeEncoded encodes a tensor in row chunks on all workers and commits
// the chunks in row order: each chunk's span (its rows, and the header of
// every matrix starting among them) is written with a positional write and
// hashed, so the digest covers the tensor front to back. An encoder that
// needs each matrix's max |x| first gets a scan pass over the same chunks
// (which never cross a matrix boundary then), each chunk's source pages
// released as soon as it is scanned: resident memory stays at the chunks in
// flight, whatever the size of a matrix.
func (x *executor) writeEncoded(ctx context.Context, e layout.Entry, src []byte, off int64, release func(pos, n int64)) (string, codecs.Stats, error) {
	m, err := codecs.FlattenShape(e.Shape)
	if err != nil {
		return "", codecs.Stats{}, fmt.Errorf("dgq: tensor %s: %w", e.Name, err)
	}
	rowBytes := m.K * int64(e.DType.Size())
	if int64(len(src)) != m.Rows*rowBytes {
		return "", codecs.Stats{}, fmt.Errorf("%w: tensor %s: source holds %d bytes, shape %v needs %d", ErrSource, e.Name, len(src), e.Shape, m.Rows*rowBytes)
	}
	enc, err := codecs.NewEncoder(e.Format, e.DType, m, x.method)
	if err != nil {
		return "", codecs.Stats{}, fmt.Errorf("dgq: tensor %s: %w", e.Name, err)
	}
	if x.imatrix != nil && e.Format.Quantized() {
		w, unreached := x.imatrix.weights(e.Name, m)
		if err := enc.SetImportance(w); err != nil {
			return "", codecs.Stats{}, fmt.Errorf("dgq: tensor %s: %w", e.Name, err)
		}
		x.unreached = unreached
	}
	l := enc.Layout()
	chunks := rowChunks(m.Rows, max(1, chunkElements/max(m.K, 1)), l.MatRows, enc.NeedsScan())
	rows := func(c chunk) []byte { return src[c.r0*rowBytes : (c.r0+c.n)*rowBytes] }
	if enc.NeedsScan() {
		if err := x.scanMatrices(ctx, enc, chunks, rows, l.MatRows, release, rowBytes); err != nil {
			return "", codecs.Stats{}, fmt.Errorf("%w: tensor %s: %w", ErrSource, e.Name, err)
		}
	}
	h := blake3.New()
	var total codecs.Stats
	commit := func(r chunkResult) error {
		start, _ := l.Span(r.r0, r.n)
		if _, err := x.blob.WriteAt(r.bytes, off+start); err != nil {
			return fmt.Errorf("dgq: write tensor %s: %w", e.Name, err)
		}
		h.Write(r.bytes)
		total.Merge(r.stats)
		release(r.r0*rowBytes, r.n*rowBytes)
		x.progress.Add(r.n * rowBytes)
		return nil
	}
	encodeChunk := func(idx int) chunkResult {
		c := chunks[idx]
		start, end := l.Span(c.r0, c.n)
		out := make([]byte, end-start)
		var st codecs.Stats
		err := guardFault("tensor "+e.Name, func() (err error) {
			st, err = enc.EncodeRows(out, rows(c), c.r0, c.n)
			return err
		})
		return chunkResult{idx: idx, r0: c.r0, n: c.n, bytes: out, stats: st, err: err}
	}
	if err := x.ordered(ctx, len(chunks), encodeChunk, commit); err != nil {
		if errors.Is(err, codecs.ErrNonFinite) || errors.Is(err, codecs.ErrRange) {
			return "", total, fmt.Errorf("%w: tensor %s: %w", ErrSource, e.Name, err)
		}
		return "", total, fmt.Errorf("dgq: tensor %s: %w", e.Name, err)
	}
	return hex.EncodeToString(h.Sum(nil)), total, nil
}

// chunk is a run of rows encoded by one work item.
type chunk struct{ r0, n int64 }

// rowChunks splits rows into runs of about per rows; with byMatrix set no
// run crosses a boundary of the matrices of matRows rows (each matrix is
// split into equal runs, and small matrices are never split).
func rowChunks(rows, per, matRows int64, byMatrix bool) []chunk {
	var out []chunk
	if !byMatrix || matRows <= 0 {
		for r0 := int64(0); r0 < rows; r0 += per {
			out = append(out, chunk{r0, min(per, rows-r0)})
		}
		return out
	}
	parts := (matRows + per - 1) / per // runs per matrix
	step := (matRows + parts - 1) / parts
	for m0 := int64(0); m0 < rows; m0 += matRows {
		for r0 := m0; r0 < m0+matRows; r0 += step {
			out = append(out, chunk{r0, min(step, m0+matRows-r0)})
		}
	}
	return out
}

// scanMatrices sets every matrix's max |x| from a parallel scan of the
// chunks (none crosses a matrix boundary), releasing each chunk's source
// pages as soon as it is scanned.
func (x *executor) scanMatrices(ctx context.Context, enc *codecs.Encoder, chunks []chunk, rows func(chunk) []byte, matRows int64, release func(pos, n int64), rowBytes int64) error {
	amax := map[int64]float32{}
	work := func(idx int) chunkResult {
		c := chunks[idx]
		var a float32
		err := guardFault("a source tensor", func() (err error) {
			a, err = enc.ScanRows(rows(c))
			return err
		})
		release(c.r0*rowBytes, c.n*rowBytes)
		return chunkResult{idx: idx, r0: c.r0, stats: codecs.Stats{MaxAbsErr: float64(a)}, err: err}
	}
	err := x.ordered(ctx, len(chunks), work, func(r chunkResult) error {
		mat := r.r0 / matRows
		amax[mat] = max(amax[mat], float32(r.stats.MaxAbsErr))
		return nil
	})
	for mat, a := range amax {
		enc.SetAmax(mat, a)
	}
	return err
}

// ordered runs work(0..n-1) on the workers and hands the results to commit
// in index order on the calling goroutine. At most 2·workers results are in
// flight, which bounds memory. The first error stops everything.
func (x *executor) ordered(ctx context.Context, n int, work func(int) chunkResult, commit func(chunkResult) error) error {
	if n == 0 {
		return nil
	}
	workers := x.workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan int)
	results := make(chan chunkResult, workers)
	slots := make(chan struct{}, 2*workers)
	var wg sync.WaitGroup
	go func() {
		defer close(jobs)
		for i := 0; i < n; i++ {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				r := work(i)
				select {
				case results <- r:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(results) }()
	pending := make(map[int]chunkResult)
	next := 0
	var firstErr error
	for r := range results {
		if firstErr != nil {
			continue
		}
		if r.err != nil {
			firstErr = r.err
			cancel()
			continue
		}
		pending[r.idx] = r
		for {
			c, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			if err := commit(c); err != nil {
				firstErr = err
				cancel()
				break
			}
			next++
			<-slots
		}
	}
	if firstErr != nil {
		return firstErr
	}
	if next != n {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fmt.Errorf("dgq: internal error: %d of %d chunks committed", next, n)
	}
	return nil
}
