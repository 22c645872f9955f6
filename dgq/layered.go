package dgq

import (
	"fmt"
	"path/filepath"
	"sort"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/layout"
)

// LocalLayout places the stored tensors of a layered pack in its compact
// local blob: head tensors packed at 64-byte alignment in plan order, then,
// from ExpertSplit (a multiple of 16 KiB), the expert tail laid out exactly
// as in the canonical blob, so a loader maps it without copying.
type LocalLayout struct {
	Offsets     map[string]int64 // local offset of every stored tensor
	HasTail     bool             // whether the local blob holds the expert tail
	ExpertSplit int64
	Size        int64
}

// PlanLocal lays out the tensors of entries for which stored(e) is true.
// Canonical offsets come from the entries (the plan or a manifest).
func PlanLocal(entries []layout.Entry, canonicalSplit int64, stored func(layout.Entry) bool) (*LocalLayout, error) {
	l := &LocalLayout{Offsets: map[string]int64{}}
	var end int64
	tail := false
	for _, e := range entries {
		if !stored(e) {
			continue
		}
		if e.Class == layout.Experts {
			tail = true
			continue
		}
		off, err := codecs.AlignUp(end, layout.TensorAlign)
		if err != nil {
			return nil, err
		}
		l.Offsets[e.Name] = off
		end = off + e.Size
	}
	split, err := codecs.AlignUp(end, layout.ExpertSplitAlign)
	if err != nil {
		return nil, err
	}
	l.ExpertSplit, l.Size = split, split
	if !tail {
		l.Size = end
		return l, nil
	}
	l.HasTail = true
	for _, e := range entries {
		if e.Class != layout.Experts {
			continue
		}
		if !stored(e) {
			return nil, fmt.Errorf("dgq: expert tensor %s is not stored locally while other experts are; the local tail must mirror the canonical one", e.Name)
		}
		l.Offsets[e.Name] = split + e.Offset - canonicalSplit
		l.Size = max(l.Size, split+e.Offset+e.Size-canonicalSplit)
	}
	return l, nil
}

// overlayEmitter turns a plan into a layered pack: raw tensors reference the
// shard that holds them, everything else goes to the local blob.
type overlayEmitter struct {
	local *LocalLayout
	files []ExternalFile // keyed by shard name, as the engine keys them
	base  BaseModel
}

func newOverlayEmitter(plan *layout.Plan, inv *inventory) (*overlayEmitter, error) {
	if inv.source.Repo == "" || inv.source.Revision == "" {
		return nil, fmt.Errorf("%w: --overlay needs the source in a Hugging Face cache (…/models--ORG--NAME/snapshots/REV or -m ORG/NAME[@REV]); %s is not", ErrUsage, inv.source.Path)
	}
	isLocal := func(e layout.Entry) bool { return e.Format != codecs.Raw }
	local, err := PlanLocal(plan.Entries, plan.ExpertSplit, isLocal)
	if err != nil {
		return nil, err
	}
	em := &overlayEmitter{local: local, base: BaseModel{Repo: inv.source.Repo, Revision: inv.source.Revision}}
	var shards []string
	seen := map[string]bool{}
	for _, e := range plan.Entries {
		if !isLocal(e) {
			if name := inv.refs[e.Name].Shard.Name; !seen[name] {
				seen[name] = true
				shards = append(shards, name)
			}
		}
	}
	sort.Strings(shards)
	for _, name := range shards {
		pin, err := PinShard(inv.snap.Dir, name)
		if err != nil {
			return nil, err
		}
		em.files = append(em.files, pin)
	}
	return em, nil
}

// place tells the executor where an entry's bytes go in the local blob.
func (em *overlayEmitter) place(e layout.Entry) (int64, bool) {
	off, ok := em.local.Offsets[e.Name]
	return off, !ok
}

// annotate adds the sources and the layered fields to a manifest.
func (em *overlayEmitter) annotate(m *Manifest, inv *inventory) {
	for i := range m.Tensors {
		t := &m.Tensors[i]
		if off, ok := em.local.Offsets[t.Name]; ok {
			t.Source = &Source{Kind: SourceLocal, Offset: off}
			continue
		}
		ref := inv.refs[t.Name]
		t.Source = &Source{Kind: SourceExternal, File: filepath.ToSlash(ref.Shard.Name), Offset: ref.Offset}
	}
	m.ExternalFiles = em.files
	base := em.base
	m.BaseModel = &base
	em.local.Annotate(m)
}

// Annotate records the local blob's size and, when it holds the expert
// tail, where that starts (m must have a dgq object).
func (l *LocalLayout) Annotate(m *Manifest) {
	size := l.Size
	m.DGQ.LocalBlobSize = &size
	m.LocalExpertSplit = nil
	if l.HasTail {
		split := l.ExpertSplit
		m.LocalExpertSplit = &split
	}
}
