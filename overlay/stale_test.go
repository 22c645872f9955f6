package overlay

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/hfcache"
)

// Issue 21: a byte changed in the data of a cached shard behind a layered
// pack (its size and header unchanged, so the pin holds) was reported as an
// invalid pack ("content digest … does not match", exit 3) naming neither
// the shard nor the fix. The loader now refuses it as a stale cache
// (hfcache.ErrStale) naming the shard and ending with the dgq download
// command that fetches it again, and audit reports it as a stale finding.
func TestChangedShardBytesAreStale(t *testing.T) {
	snap := hubCache(t)
	layered := quantize(t, tinyRepo, "q4", true)
	m, err := dgq.ReadManifest(layered)
	if err != nil {
		t.Fatal(err)
	}
	var victim dgq.Tensor
	for _, tn := range m.Tensors {
		if tn.Source != nil && tn.Source.Kind == dgq.SourceExternal && tn.Size > 0 {
			victim = tn
			break
		}
	}
	if victim.Name == "" {
		t.Fatal("no external tensor")
	}
	shard := victim.Source.File
	p := blobPath(t, snap, shard)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[victim.Source.Offset] ^= 0x40
	writeOver(t, p, b)

	_, err = Open(layered)
	var se *hfcache.StaleError
	if !errors.As(err, &se) || !errors.Is(err, hfcache.ErrStale) || errors.Is(err, dgq.ErrInvalid) {
		t.Fatalf("Open: %v, want a stale-cache error only", err)
	}
	msg := err.Error()
	t.Log(msg)
	fix := "dgq download " + tinyRepo + " --revision " + m.BaseModel.Revision + " --include " + shard
	if !strings.Contains(msg, shard) || !strings.Contains(msg, victim.Name) || !strings.HasSuffix(msg, fix) {
		t.Errorf("error %q does not name the shard %s and the tensor, or does not end with %q", msg, shard, fix)
	}
	if !strings.Contains(msg, "remove "+p) {
		t.Errorf("error %q does not say to remove the cached file %s", msg, p)
	}

	rep, err := Audit(context.Background(), layered, dgq.AuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || len(rep.Findings) == 0 {
		t.Fatalf("audit: %+v", rep)
	}
	for _, f := range rep.Findings {
		if f.Kind != dgq.KindStale || !strings.HasSuffix(f.Message, fix) {
			t.Errorf("audit finding %v, want only stale findings ending with the fix", f)
		}
	}

	// The fix works: the cached file removed and put back (as dgq download
	// would fetch it), the pack loads again.
	b[victim.Source.Offset] ^= 0x40
	writeOver(t, p, b)
	pk, err := Open(layered)
	if err != nil {
		t.Fatalf("after the fix: %v", err)
	}
	pk.Close()
}
