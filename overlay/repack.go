package overlay

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/layout"
)

// RepackOptions configures RepackOverlay and RepackMonolithic.
type RepackOptions struct {
	Pack       string // input pack directory
	Out        string // output pack directory
	HFRepo     string // base repo for --overlay (default: the pack's recorded source)
	HFRevision string // base revision for --overlay (default: the pack's recorded source)
	Force      bool
	Progress   dgq.Progress
}

// RepackResult describes a repack.
type RepackResult struct {
	Manifest *dgq.Manifest
	// Mismatched lists raw tensors that differ from (or are absent in) the
	// base snapshot and were therefore stored locally (overlay only).
	Mismatched []string
	LocalBytes int64 // size of the output's own blob
}

// RepackOverlay splits a self-contained pack into a layered one: each raw
// tensor is streamed and compared with the same tensor of the Hugging Face
// base snapshot (the verbatim audit); identical ones become references into
// the base's shards, a tensor that differs is kept locally and reported.
// Every tensor's digest is verified while it is read. Reads are positional
// and streamed through one buffer, so memory stays flat.
func RepackOverlay(ctx context.Context, o RepackOptions) (*RepackResult, error) {
	m, err := dgq.ReadManifest(o.Pack)
	if err != nil {
		return nil, err
	}
	if m.Layered() {
		return nil, fmt.Errorf("%w: %s is already layered; use repack --monolithic", ErrRepack, o.Pack)
	}
	if err := dgq.CheckOutput(o.Out, o.Force); err != nil {
		return nil, err
	}
	if err := dgq.CheckOutputPlacement(o.Pack, o.Out); err != nil {
		return nil, err
	}
	repo, rev := baseOf(m, o)
	if repo == "" || rev == "" {
		return nil, fmt.Errorf("%w: %s records no Hugging Face source; pass --hf-repo ORG/NAME --hf-revision REV", ErrRepack, o.Pack)
	}
	root, _ := hfcache.CacheRoot()
	res, err := hfcache.Resolve(root, hfcache.RepoRef{Repo: repo, Revision: rev})
	if err != nil {
		return nil, err
	}
	snap, err := hfcache.OpenSnapshot(res.Dir)
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	p, err := dgq.OpenWithoutMapping(o.Pack)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	base := map[string]hfcache.TensorRef{}
	for _, r := range snap.Tensors() {
		base[r.Name] = r
	}
	prog := dgq.ProgressOrNop(o.Progress)
	prog.Start("verify", m.BlobSize)
	// Decide each tensor's source: stream it (digest check) and compare raw
	// tensors with the base, chunk by chunk.
	s := newStreamer()
	external := map[string]hfcache.TensorRef{}
	var mismatched []string
	for _, t := range m.Tensors {
		ref, inBase := base[t.Name]
		same := t.Format == codecs.Raw && inBase && ref.DType == t.DType && ref.Size == t.Size
		var pos int64
		err := s.stream(ctx, p.Blob, t.Offset, t.Size, t.Digest, func(chunk []byte) error {
			if same {
				same = bytes.Equal(chunk, ref.Bytes()[pos:pos+int64(len(chunk))])
				ref.Shard.Release(ref.Offset+pos, int64(len(chunk)))
			}
			pos += int64(len(chunk))
			prog.Add(int64(len(chunk)))
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: tensor %s: %w", o.Pack, t.Name, err)
		}
		switch {
		case same:
			external[t.Name] = ref
		case t.Format == codecs.Raw:
			mismatched = append(mismatched, t.Name)
		}
	}
	prog.Finish()
	entries := manifestEntries(m)
	anyExpertLocal := false
	for _, e := range entries {
		if _, ext := external[e.Name]; !ext && e.Class == layout.Experts {
			anyExpertLocal = true
		}
	}
	stored := func(e layout.Entry) bool {
		_, ext := external[e.Name]
		return !ext || (anyExpertLocal && e.Class == layout.Experts)
	}
	local, err := dgq.PlanLocal(entries, m.ExpertSplit, stored)
	if err != nil {
		return nil, err
	}
	out := *m
	out.Tensors = append([]dgq.Tensor(nil), m.Tensors...)
	out.ExternalFiles = externalFiles(external, snap, repo, res.Revision, &out)
	for i := range out.Tensors {
		t := &out.Tensors[i]
		if off, ok := local.Offsets[t.Name]; ok {
			t.Source = &dgq.Source{Kind: dgq.SourceLocal, Offset: off}
		}
	}
	split, size := local.ExpertSplit, local.Size
	out.LocalExpertSplit, out.LocalBlobSize = &split, &size
	from := func(t dgq.Tensor) (io.ReaderAt, int64) { return p.Blob, t.Offset }
	// Every tensor's digest was verified by the pass above: the local ones are
	// copied without hashing them a second time.
	if err := writeLayout(ctx, o, &out, p.Dir, from, local.Offsets, size, prog, false); err != nil {
		return nil, err
	}
	sort.Strings(mismatched)
	return &RepackResult{Manifest: &out, Mismatched: mismatched, LocalBytes: size}, nil
}

// externalFiles pins every shard that external tensors come from and sets
// those tensors' sources.
func externalFiles(external map[string]hfcache.TensorRef, snap *hfcache.Snapshot, repo, rev string, m *dgq.Manifest) []dgq.ExternalFile {
	var shards []string
	seen := map[string]*hfcache.Shard{}
	for _, ref := range external {
		if seen[ref.Shard.Name] == nil {
			seen[ref.Shard.Name] = ref.Shard
			shards = append(shards, ref.Shard.Name)
		}
	}
	sort.Strings(shards)
	ids := map[string]string{}
	var files []dgq.ExternalFile
	for i, name := range shards {
		id := fmt.Sprintf("hf%d", i)
		ids[name] = id
		digest, size, err := hfcache.FileHeaderDigest(filepath.Join(snap.Dir, name))
		if err != nil {
			digest = ""
		}
		files = append(files, dgq.ExternalFile{ID: id, Role: dgq.RoleHF, Repo: repo, Revision: rev, Path: filepath.ToSlash(name), Size: size, HeaderSHA256: digest})
	}
	for i := range m.Tensors {
		if ref, ok := external[m.Tensors[i].Name]; ok {
			m.Tensors[i].Source = &dgq.Source{Kind: dgq.SourceExternal, File: ids[ref.Shard.Name], Offset: ref.Offset}
		}
	}
	return files
}

// RepackMonolithic flattens a layered pack into a self-contained one: every
// tensor's bytes are streamed from where its source says (local blob or
// pinned shard) into a fresh blob at its canonical offset, digests verified on
// the way, nothing requantized, and no view assembled (memory stays flat).
// For the same source and profile the blob is byte-identical to a direct
// quantize.
func RepackMonolithic(ctx context.Context, o RepackOptions) (*RepackResult, error) {
	m, err := dgq.ReadManifest(o.Pack)
	if err != nil {
		return nil, err
	}
	if !m.Layered() {
		return nil, fmt.Errorf("%w: %s is already self-contained", ErrRepack, o.Pack)
	}
	if err := dgq.CheckOutput(o.Out, o.Force); err != nil {
		return nil, err
	}
	if err := dgq.CheckOutputPlacement(o.Pack, o.Out); err != nil {
		return nil, err
	}
	p, err := dgq.OpenWithoutMapping(o.Pack)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	files, err := openPins(o.Pack, m)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	out := *m
	out.Tensors = append([]dgq.Tensor(nil), m.Tensors...)
	offsets := map[string]int64{}
	for i := range out.Tensors {
		out.Tensors[i].Source = nil
		offsets[out.Tensors[i].Name] = out.Tensors[i].Offset
	}
	out.ExternalFiles, out.LocalExpertSplit, out.LocalBlobSize = nil, nil, nil
	sources := map[string]*dgq.Source{}
	for _, t := range m.Tensors {
		sources[t.Name] = t.Source
	}
	from := func(t dgq.Tensor) (io.ReaderAt, int64) {
		src := sources[t.Name]
		if src.Kind == dgq.SourceExternal {
			return files[src.File], src.Offset
		}
		return p.Blob, src.Offset
	}
	if err := writeLayout(ctx, o, &out, p.Dir, from, offsets, m.BlobSize, dgq.ProgressOrNop(o.Progress), true); err != nil {
		return nil, err
	}
	return &RepackResult{Manifest: &out, LocalBytes: m.BlobSize}, nil
}

// writeLayout writes a new pack: each tensor listed in offsets is streamed
// from where from says (its digest verified when verify is set) to that offset of a
// blobSize-byte blob; then the side files and the manifest. The manifest's
// tensors carry their original, canonical entries.
func writeLayout(ctx context.Context, o RepackOptions, m *dgq.Manifest, srcDir string, from func(dgq.Tensor) (io.ReaderAt, int64), offsets map[string]int64, blobSize int64, prog dgq.Progress, verify bool) error {
	st, err := dgq.NewStaging(o.Out, o.Force)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			st.Abort()
		}
	}()
	f, err := os.OpenFile(st.Path(dgq.BlobName), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("overlay: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(blobSize); err != nil {
		return fmt.Errorf("overlay: size blob: %w", err)
	}
	var total int64
	for _, t := range m.Tensors {
		if _, ok := offsets[t.Name]; ok {
			total += t.Size
		}
	}
	prog.Start("write", total)
	s := newStreamer()
	for _, t := range m.Tensors {
		off, ok := offsets[t.Name]
		if !ok {
			continue
		}
		r, srcOff := from(t)
		pos := off
		want := ""
		if verify {
			want = t.Digest
		}
		err := s.stream(ctx, r, srcOff, t.Size, want, func(chunk []byte) error {
			if _, err := f.WriteAt(chunk, pos); err != nil {
				return fmt.Errorf("write: %w", err)
			}
			pos += int64(len(chunk))
			prog.Add(int64(len(chunk)))
			return nil
		})
		if err != nil {
			return fmt.Errorf("overlay: tensor %s: %w", t.Name, err)
		}
	}
	prog.Finish()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("overlay: sync blob: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("overlay: close blob: %w", err)
	}
	m.Blob = dgq.BlobName
	if err := dgq.CopyPackFiles(st, srcDir, m.Files); err != nil {
		return err
	}
	if findings := dgq.Validate(m, blobSize); len(findings) > 0 {
		return &dgq.InvalidError{Dir: o.Out, Findings: findings}
	}
	data, err := m.Marshal()
	if err != nil {
		return err
	}
	if err := st.WriteFile(dgq.ManifestName, data); err != nil {
		return err
	}
	if err := st.Publish(); err != nil {
		return err
	}
	done = true
	return nil
}

// baseOf picks the base repo and revision: the flags, else the pack's record,
// else what the recorded source path says.
func baseOf(m *dgq.Manifest, o RepackOptions) (string, string) {
	repo, rev := o.HFRepo, o.HFRevision
	if m.Source != nil {
		if repo == "" {
			repo = m.Source.Repo
		}
		if rev == "" {
			rev = m.Source.Revision
		}
		if r, v, ok := hfcache.Detect(m.Source.Path); ok {
			if repo == "" {
				repo = r
			}
			if rev == "" {
				rev = v
			}
		}
	}
	return repo, rev
}

// manifestEntries converts manifest tensors to plan entries.
func manifestEntries(m *dgq.Manifest) []layout.Entry {
	entries := make([]layout.Entry, len(m.Tensors))
	for i, t := range m.Tensors {
		entries[i] = layout.Entry{Name: t.Name, Class: t.Class, Format: t.Format, DType: t.DType, Shape: t.Shape, Offset: t.Offset, Size: t.Size}
	}
	sort.SliceStable(entries, func(a, b int) bool { return entries[a].Offset < entries[b].Offset })
	return entries
}
