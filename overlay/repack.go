package overlay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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
	pack, err := dgq.ResolvePack(o.Pack)
	if err != nil {
		return nil, err
	}
	o.Pack = pack
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
	repo, rev, err := baseOf(m, o)
	if err != nil {
		return nil, err
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
	if err := checkBase(o.Pack, m, snap, base, repo+"@"+res.Revision); err != nil {
		return nil, err
	}
	prog := dgq.ProgressOrNop(o.Progress)
	prog.Start("verify", m.CanonicalSize())
	// Decide each tensor's source: stream it (digest check) and compare raw
	// tensors with the base, chunk by chunk.
	s := newStreamer()
	external := map[string]hfcache.TensorRef{}
	var mismatched []string
	digests := make([]string, len(m.Tensors))
	for i, t := range m.Tensors {
		ref, inBase := base[t.Name]
		same := t.Format == codecs.Raw && inBase && ref.DType == t.DType && ref.Size == t.Size
		var pos int64
		var err error
		digests[i], err = s.stream(ctx, p.Blob, t.Offset, t.Size, t.Digest, true, func(chunk []byte) error {
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
	split, _ := m.Split()
	local, err := dgq.PlanLocal(entries, split, stored)
	if err != nil {
		return nil, err
	}
	out, err := rewrittenManifest(m, o.Pack)
	if err != nil {
		return nil, err
	}
	for i := range out.Tensors {
		out.Tensors[i].Digest = digests[i] // verified, or computed for a pack without digests
	}
	if out.ExternalFiles, err = externalFiles(external, snap, &out); err != nil {
		return nil, err
	}
	out.BaseModel = &dgq.BaseModel{Repo: repo, Revision: res.Revision}
	for i := range out.Tensors {
		t := &out.Tensors[i]
		if off, ok := local.Offsets[t.Name]; ok {
			t.Source = &dgq.Source{Kind: dgq.SourceLocal, Offset: off}
		}
	}
	local.Annotate(&out)
	out.SetVersion()
	size := local.Size
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
func externalFiles(external map[string]hfcache.TensorRef, snap *hfcache.Snapshot, m *dgq.Manifest) ([]dgq.ExternalFile, error) {
	var shards []string
	seen := map[string]*hfcache.Shard{}
	for _, ref := range external {
		if seen[ref.Shard.Name] == nil {
			seen[ref.Shard.Name] = ref.Shard
			shards = append(shards, ref.Shard.Name)
		}
	}
	sort.Strings(shards)
	var files []dgq.ExternalFile
	for _, name := range shards {
		pin, err := dgq.PinShard(snap.Dir, name)
		if err != nil {
			return nil, err
		}
		files = append(files, pin)
	}
	for i := range m.Tensors {
		if ref, ok := external[m.Tensors[i].Name]; ok {
			m.Tensors[i].Source = &dgq.Source{Kind: dgq.SourceExternal, File: filepath.ToSlash(ref.Shard.Name), Offset: ref.Offset}
		}
	}
	return files, nil
}

// RepackMonolithic flattens a layered pack into a self-contained one: every
// tensor's bytes are streamed from where its source says (local blob or
// pinned shard) into a fresh blob at its canonical offset, digests verified on
// the way, nothing requantized, and no view assembled (memory stays flat).
// For the same source and profile the blob is byte-identical to a direct
// quantize.
func RepackMonolithic(ctx context.Context, o RepackOptions) (*RepackResult, error) {
	pack, err := dgq.ResolvePack(o.Pack)
	if err != nil {
		return nil, err
	}
	o.Pack = pack
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
	out, err := rewrittenManifest(m, o.Pack)
	if err != nil {
		return nil, err
	}
	offsets := map[string]int64{}
	for i := range out.Tensors {
		out.Tensors[i].Source = nil
		offsets[out.Tensors[i].Name] = out.Tensors[i].Offset
	}
	out.ExternalFiles, out.LocalExpertSplit, out.BaseModel, out.DGQ.LocalBlobSize = nil, nil, nil, nil
	out.SetVersion()
	sources := map[string]*dgq.Source{}
	for _, t := range m.Tensors {
		sources[t.Name] = t.Source
	}
	from := func(t dgq.Tensor) (io.ReaderAt, int64) {
		src := sources[t.Name]
		switch {
		case src == nil:
			return p.Blob, t.Offset
		case src.Kind == dgq.SourceExternal:
			return files[src.File], src.Offset
		}
		return p.Blob, src.Offset
	}
	size := m.CanonicalSize()
	if err := writeLayout(ctx, o, &out, p.Dir, from, offsets, size, dgq.ProgressOrNop(o.Progress), true); err != nil {
		return nil, err
	}
	return &RepackResult{Manifest: &out, LocalBytes: size}, nil
}

// writeLayout writes a new pack: each tensor listed in offsets is streamed
// from where from says (its digest verified when verify is set) to that offset of a
// blobSize-byte blob; then the side files and the manifest. The manifest's
// tensors carry their original, canonical entries.
func writeLayout(ctx context.Context, o RepackOptions, m *dgq.Manifest, srcDir string, from func(dgq.Tensor) (io.ReaderAt, int64), offsets map[string]int64, blobSize int64, prog dgq.Progress, verify bool) error {
	w, err := dgq.NewPackWriter(o.Out, o.Force, blobSize)
	if err != nil {
		return err
	}
	defer w.Abort()
	var total int64
	for _, t := range m.Tensors {
		if _, ok := offsets[t.Name]; ok {
			total += t.Size
		}
	}
	prog.Start("write", total)
	s := newStreamer()
	for i, t := range m.Tensors {
		off, ok := offsets[t.Name]
		if !ok {
			continue
		}
		r, srcOff := from(t)
		pos := off
		digest, err := s.stream(ctx, r, srcOff, t.Size, t.Digest, verify, func(chunk []byte) error {
			if _, err := w.WriteAt(chunk, pos); err != nil {
				return fmt.Errorf("write: %w", err)
			}
			pos += int64(len(chunk))
			prog.Add(int64(len(chunk)))
			return nil
		})
		if err != nil {
			return fmt.Errorf("overlay: tensor %s: %w", t.Name, err)
		}
		if verify {
			m.Tensors[i].Digest = digest // verified, or computed for a pack without digests
		}
	}
	prog.Finish()
	m.Blob = dgq.BlobName
	if err := dgq.CopyPackFiles(w.Staging(), srcDir, m.DGQ.Files); err != nil {
		return err
	}
	return w.Publish(m)
}

// baseOf picks the base repo and revision: the flags, else the pack's
// record (dgq.source, else what the recorded source path says). A recorded
// revision is only taken for the recorded repo: --hf-repo naming another
// repo needs --hf-revision. Without a repo or a revision it is ErrBase,
// naming the flag that is missing.
func baseOf(m *dgq.Manifest, o RepackOptions) (string, string, error) {
	var recRepo, recRev string
	if m.DGQ != nil && m.DGQ.Source != nil {
		recRepo, recRev = m.DGQ.Source.Repo, m.DGQ.Source.Revision
	}
	if r, v, ok := hfcache.Detect(m.SourceModel); ok {
		if recRepo == "" {
			recRepo = r
		}
		if recRev == "" && r == recRepo {
			recRev = v
		}
	}
	repo, rev := o.HFRepo, o.HFRevision
	if repo == "" {
		repo = recRepo
	}
	if rev == "" && repo == recRepo {
		rev = recRev
	}
	switch {
	case repo == "" && rev == "":
		return "", "", fmt.Errorf("%w: %s records no Hugging Face source; pass --hf-repo ORG/NAME --hf-revision REV", ErrBase, o.Pack)
	case repo == "":
		return "", "", fmt.Errorf("%w: %s records no Hugging Face source; pass --hf-repo ORG/NAME with --hf-revision %s", ErrBase, o.Pack, rev)
	case rev == "" && recRepo != "" && repo != recRepo:
		return "", "", fmt.Errorf("%w: --hf-repo %s is not the pack's recorded source %s, whose revision does not apply; pass --hf-revision REV", ErrBase, repo, recRepo)
	case rev == "" && recRepo == "":
		return "", "", fmt.Errorf("%w: %s records no Hugging Face source; with --hf-repo %s pass --hf-revision REV", ErrBase, o.Pack, repo)
	case rev == "":
		return "", "", fmt.Errorf("%w: %s records no revision of %s; pass --hf-revision REV", ErrBase, o.Pack, repo)
	}
	return repo, rev, nil
}

// checkBase refuses a base snapshot that is not the pack's model: the
// pack's config.json (when it has one) must equal the snapshot's, every raw
// tensor of the pack that the snapshot holds must have its shape and dtype
// (a tensor of the same name otherwise would be referenced, or silently kept
// local, against another model), and the snapshot must hold at least one of
// the pack's raw tensors. The error names the first mismatch.
func checkBase(pack string, m *dgq.Manifest, snap *hfcache.Snapshot, base map[string]hfcache.TensorRef, name string) error {
	if pc, err := readPackConfig(pack); err != nil {
		return err
	} else if pc != nil {
		data, err := snap.ReadFile("config.json", maxConfigBytes)
		if err != nil {
			return fmt.Errorf("overlay: base %s: %w", name, err)
		}
		sc, err := layout.ParseConfig(data)
		if err != nil {
			return fmt.Errorf("overlay: base %s: config.json: %w", name, err)
		}
		if d := layout.ConfigDiff(pc, sc); len(d) > 0 {
			return fmt.Errorf("%w: base %s has another config.json than the pack %s (%s); pass the pack's own source with --hf-repo and --hf-revision", ErrBase, name, pack, d[0])
		}
	}
	found := 0
	for _, t := range m.Tensors {
		if t.Format != codecs.Raw {
			continue
		}
		ref, ok := base[t.Name]
		if !ok {
			continue
		}
		if ref.DType != t.DType || !slices.Equal(ref.Shape, t.Shape) {
			return fmt.Errorf("%w: base %s holds %s as %s %v, the pack as %s %v; pass the pack's own source with --hf-repo and --hf-revision",
				ErrBase, name, t.Name, ref.DType, ref.Shape, t.DType, t.Shape)
		}
		found++
	}
	if found == 0 {
		return fmt.Errorf("%w: base %s holds none of the pack's raw tensors: nothing could be referenced; pass the pack's own source with --hf-repo and --hf-revision", ErrBase, name)
	}
	return nil
}

// maxConfigBytes bounds a config.json read to compare.
const maxConfigBytes = 16 << 20

// readPackConfig parses the pack's config.json side file; nil when the pack
// has none.
func readPackConfig(pack string) (*layout.Config, error) {
	f, err := os.Open(filepath.Join(pack, "config.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("overlay: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("overlay: %s: %w", pack, err)
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("%w: %s: config.json is larger than %d bytes", dgq.ErrInvalid, pack, maxConfigBytes)
	}
	c, err := layout.ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("overlay: %s: config.json: %w", pack, err)
	}
	return c, nil
}

// rewrittenManifest copies m for a repack: the tensors (to be given new
// sources) and a dgq object, made from the engine's fields and the side
// files found in the pack when the input pack has none.
func rewrittenManifest(m *dgq.Manifest, dir string) (dgq.Manifest, error) {
	out := *m
	out.Tensors = append([]dgq.Tensor(nil), m.Tensors...)
	ext := dgq.Extension{Profile: m.DGQProfile(), BlobSize: m.CanonicalSize()}
	if m.DGQ != nil {
		ext = *m.DGQ
	}
	files, err := dgq.SideFilesOf(dir, m)
	if err != nil {
		return out, err
	}
	ext.Generator, ext.Files = "dgq "+dgq.Version, files
	out.DGQ = &ext
	if dgq.IsPrivatePath(out.SourceModel) {
		repo := ""
		if ext.Source != nil {
			repo = ext.Source.Repo
		} else if r, _, ok := hfcache.Detect(m.SourceModel); ok {
			repo = r
		}
		out.SourceModel = dgq.PublicSource(out.SourceModel, repo)
	}
	return out, nil
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
