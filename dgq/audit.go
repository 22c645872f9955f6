package dgq

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/zeebo/blake3"
)

// AuditReport lists every problem found in a pack; OK is true only when
// there are none.
type AuditReport struct {
	OK       bool      `json:"ok"`
	Findings []Finding `json:"findings"`
}

// AuditOptions configures Audit.
type AuditOptions struct {
	Workers int // hashing goroutines; 0 = GOMAXPROCS
	// Deep also decodes every tensor and reports any that holds a NaN or an
	// infinity: a check of the content for packs without digests.
	Deep     bool
	Progress Progress
	// Layered assembles the canonical view of a layered pack (the overlay
	// package provides it). It returns the view (nil when it cannot be built),
	// a release function, and findings such as stale external files.
	Layered func(ctx context.Context, dir string, m *Manifest) (view []byte, release func(), findings []Finding)
}

// Audit checks every rule of the format and every digest of the pack in dir,
// in parallel, and reports all findings rather than stopping at the first.
// The returned error is non-nil only when the audit itself could not run
// (e.g. it was cancelled); a broken pack is a report with findings.
func Audit(ctx context.Context, dir string, opts AuditOptions) (*AuditReport, error) {
	dir, err := ResolvePack(dir)
	if err != nil {
		return nil, err
	}
	m, err := ReadManifest(dir)
	if err != nil {
		return ReportOf([]Finding{{Kind: KindManifest, Message: err.Error()}}), nil
	}
	var findings []Finding
	blobSize, blob, release, err := mapBlob(dir, m, true)
	if err != nil {
		findings = append(findings, Finding{Kind: KindBlob, Message: err.Error()})
	}
	defer release()
	if blob != nil && m.Layered() {
		findings = append(findings, checkPadding(blob, localRegions(m, int64(len(blob))), "local blob")...)
	} else if blob != nil {
		findings = append(findings, checkPadding(blob, canonicalRegions(m, int64(len(blob))), "blob")...)
	}
	structural := Validate(m, blobSize)
	findings = append(findings, structural...)
	findings = append(findings, CheckFiles(dir, m)...)
	findings = append(findings, privatePathFindings(m)...)
	if n := m.Undigested(); n > 0 {
		how := "dgq audit --deep decodes every tensor and checks it is finite"
		if opts.Deep {
			how = "--deep decodes every tensor and reports any that is not finite"
		}
		findings = append(findings, Finding{Kind: KindNoDigests, Message: fmt.Sprintf("no digests: content not verifiable (%d of %d tensors carry none; the engine writes none); %s", n, len(m.Tensors), how)})
	}
	if m.Layered() {
		if len(structural) > 0 || blobSize < 0 {
			return ReportOf(findings), nil // a structurally broken layered pack cannot be assembled
		}
		if opts.Layered == nil {
			return ReportOf([]Finding{{Kind: KindSource, Message: "layered pack: verify it with the overlay loader"}}), nil
		}
		view, release, lf := opts.Layered(ctx, dir, m)
		findings = append(findings, lf...)
		if view != nil {
			cf, err := auditContent(ctx, m, view, opts)
			release()
			if err != nil {
				return nil, err
			}
			findings = append(findings, cf...)
		}
	} else if blob != nil {
		cf, err := auditContent(ctx, m, blob, opts)
		if err != nil {
			return nil, err
		}
		findings = append(findings, cf...)
	}
	return ReportOf(findings), nil
}

// auditContent checks the canonical view's bytes: digests, and with Deep
// every tensor's decoded values.
func auditContent(ctx context.Context, m *Manifest, view []byte, opts AuditOptions) ([]Finding, error) {
	out, err := AuditDigests(ctx, m, view, opts)
	if err != nil || !opts.Deep {
		return out, err
	}
	df, err := AuditDecode(ctx, m, view, opts.Workers)
	return append(out, df...), err
}

// mapBlob opens the pack's own blob file and returns its size (-1 when it
// cannot be read) and, when mapIt is set, its read-only mapping; release
// undoes both.
func mapBlob(dir string, m *Manifest, mapIt bool) (int64, []byte, func(), error) {
	nop := func() {}
	f, err := os.Open(filepath.Join(dir, filepath.Base(m.Blob)))
	if err != nil {
		return -1, nil, nop, fmt.Errorf("blob %s cannot be opened: %v", m.Blob, err)
	}
	st, err := f.Stat()
	if err != nil || !mapIt {
		f.Close()
		if err != nil {
			return -1, nil, nop, err
		}
		return st.Size(), nil, nop, nil
	}
	blob, err := mapFile(f, st.Size())
	f.Close()
	if err != nil {
		return st.Size(), nil, nop, err
	}
	return st.Size(), blob, func() { unmapFile(blob) }, nil
}

// ReportOf builds a report from findings (OK when there are none but notes).
func ReportOf(findings []Finding) *AuditReport {
	if findings == nil {
		findings = []Finding{}
	}
	ok := true
	for _, f := range findings {
		ok = ok && f.Note()
	}
	return &AuditReport{OK: ok, Findings: findings}
}

// AuditDigests hashes every tensor of the canonical address space blob
// whose bounds are sound, in parallel, and reports each mismatch with the
// tensor's name.
func AuditDigests(ctx context.Context, m *Manifest, blob []byte, opts AuditOptions) ([]Finding, error) {
	var idx []int
	var total int64
	for i, t := range m.Tensors {
		if t.Offset >= 0 && t.Size >= 0 && t.Offset <= int64(len(blob)) && t.Size <= int64(len(blob))-t.Offset && isHexDigest(t.Digest) {
			idx = append(idx, i)
			total += t.Size
		}
	}
	prog := ProgressOrNop(opts.Progress)
	prog.Start("audit", total)
	defer prog.Finish()
	adviseSequential(blob)
	return eachTensor(ctx, m, idx, opts.Workers, func(t Tensor) []Finding {
		defer prog.Add(t.Size)
		var got string
		if err := guardFault("tensor "+t.Name, func() error { got = hashRegionContext(ctx, blob[t.Offset:t.Offset+t.Size]); return nil }); err != nil {
			return []Finding{{Tensor: t.Name, Kind: KindBlob, Message: err.Error()}}
		}
		if ctx.Err() != nil {
			return nil // eachTensor reports the cancellation
		}
		if got != t.Digest {
			return []Finding{{Tensor: t.Name, Kind: KindDigest, Message: fmt.Sprintf("content digest %s does not match the manifest's %s (bytes [%d, %d) altered)", got[:16], t.Digest[:16], t.Offset, t.Offset+t.Size)}}
		}
		return nil
	})
}

// eachTensor runs check on the tensors m.Tensors[idx] on workers
// goroutines (GOMAXPROCS when ≤ 0), largest first to keep them balanced,
// and returns every finding sorted by tensor name.
func eachTensor(ctx context.Context, m *Manifest, idx []int, workers int, check func(Tensor) []Finding) ([]Finding, error) {
	idx = slices.Clone(idx)
	sort.SliceStable(idx, func(a, b int) bool { return m.Tensors[idx[a]].Size > m.Tensors[idx[b]].Size })
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	jobs := make(chan int)
	var mu sync.Mutex
	var findings []Finding
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if f := check(m.Tensors[i]); len(f) > 0 {
					mu.Lock()
					findings = append(findings, f...)
					mu.Unlock()
				}
			}
		}()
	}
	var err error
feed:
	for _, i := range idx {
		select {
		case jobs <- i:
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	sort.SliceStable(findings, func(a, b int) bool { return findings[a].Tensor < findings[b].Tensor })
	return findings, nil
}

// Digest is the hex BLAKE3-256 of b, the digest of a tensor or side file.
func Digest(b []byte) string { return hashRegion(b) }

func hashRegion(b []byte) string { return hashRegionContext(context.Background(), b) }

// hashRegionContext is hashRegion that stops between 16 MiB steps once ctx
// is done (the result is then meaningless: the caller checks ctx).
func hashRegionContext(ctx context.Context, b []byte) string {
	h := blake3.New()
	const step = 16 << 20
	for off := 0; off < len(b); off += step {
		if ctx.Err() != nil {
			return ""
		}
		h.Write(b[off:min(off+step, len(b))])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// auditSideFiles checks that every copied file is present and unaltered.
func auditSideFiles(dir string, m *Manifest) []Finding {
	var out []Finding
	for _, sf := range m.SideFiles() {
		if sf.Name != filepath.Base(sf.Name) {
			continue // reported by Validate
		}
		f, err := os.Open(filepath.Join(dir, sf.Name))
		if err != nil {
			msg := fmt.Sprintf("side file %s: %v", sf.Name, err)
			if errors.Is(err, fs.ErrNotExist) {
				msg = fmt.Sprintf("side file %s is missing", sf.Name)
			}
			out = append(out, Finding{Kind: KindFile, Message: msg})
			continue
		}
		h := blake3.New()
		n, err := io.Copy(h, io.LimitReader(f, maxSideFileBytes+1))
		f.Close()
		switch {
		case err != nil:
			out = append(out, Finding{Kind: KindFile, Message: fmt.Sprintf("side file %s: %v", sf.Name, err)})
		case n != sf.Size:
			out = append(out, Finding{Kind: KindFile, Message: fmt.Sprintf("side file %s is %d bytes, manifest says %d", sf.Name, n, sf.Size)})
		case hex.EncodeToString(h.Sum(nil)) != sf.Digest:
			out = append(out, Finding{Kind: KindFile, Message: fmt.Sprintf("side file %s does not match its digest", sf.Name)})
		}
	}
	return out
}

// CheckFiles checks the pack directory's files besides the blob: every side
// file present and unaltered, and no orphan blob-like file.
func CheckFiles(dir string, m *Manifest) []Finding {
	return append(auditSideFiles(dir, m), orphanFiles(dir, m)...)
}

// orphanFiles reports blob-like files in the pack directory that the
// manifest does not reference (a stray or mismatched blob, a leftover
// manifest). Other files, such as a README, are the publisher's business.
func orphanFiles(dir string, m *Manifest) []Finding {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	known := map[string]bool{ManifestName: true, filepath.Base(m.Blob): true}
	for _, f := range m.SideFiles() {
		known[f.Name] = true
	}
	for _, f := range m.ExternalFiles {
		if f.Role == RolePackBin && !filepath.IsAbs(f.Path) && filepath.Dir(filepath.FromSlash(f.Path)) == "." {
			known[filepath.Base(f.Path)] = true // another pack's blob kept beside this one's
		}
	}
	var out []Finding
	for _, e := range entries {
		n := e.Name()
		if known[n] || !(strings.HasSuffix(n, ".bin") || strings.HasPrefix(n, "model.dgq")) {
			continue
		}
		out = append(out, Finding{Kind: KindFile, Message: fmt.Sprintf("orphan file %s: not referenced by the manifest (a stray blob?)", n)})
	}
	return out
}
