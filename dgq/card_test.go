package dgq_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/dgq/enginepack"
	"github.com/dgq-dev/dgq/dgq/testmodel"
	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/overlay"
)

// tinyRepo is the embedded checkpoint's repo in the hub cache.
var tinyRepo = testmodel.HubInfo()

// baseCard is the base model's README.md the tests put in the cache: a
// licence with a link relative to the repo, and keys a card does not copy.
const baseCard = "---\nlicense: apache-2.0\nlicense_link: LICENSE\nlanguage:\n- en\npipeline_tag: text-generation\n---\n# tiny\n"

// cardHub lays the tiny checkpoint out as a hub cache and points dgq at
// it; readme, when not empty, is written as the snapshot's README.md.
func cardHub(t *testing.T, readme string) (root, snap string) {
	t.Helper()
	root = filepath.Join(t.TempDir(), "hub")
	snap, err := testmodel.WriteHubCache(root)
	if err != nil {
		t.Fatal(err)
	}
	if readme != "" {
		if err := os.WriteFile(filepath.Join(snap, dgq.CardName), []byte(readme), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("DGQ_HF_HOME", root)
	return root, snap
}

// cardPack quantizes the cached tiny checkpoint into a fresh pack.
func cardPack(t *testing.T, profile string, overlayPack bool, sets ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), profile+".dgq")
	_, err := dgq.Quantize(context.Background(), dgq.QuantizeOptions{Source: tinyRepo.Repo, Out: out, Profile: profile, Sets: sets, Overlay: overlayPack})
	if err != nil {
		t.Fatalf("quantize %s: %v", profile, err)
	}
	return out
}

// splitCard parses a card: the YAML front matter between the first two
// "---" lines (key: value and "- item" list lines, decoded by a parser of
// the test's own) and the Markdown body after it.
func splitCard(t *testing.T, doc []byte) (map[string]any, string) {
	t.Helper()
	lines := strings.Split(string(doc), "\n")
	if lines[0] != "---" {
		t.Fatalf("the card does not start with front matter: %q", lines[0])
	}
	end := slices.Index(lines[1:], "---") + 1
	if end == 0 {
		t.Fatal("the front matter is not closed")
	}
	meta := map[string]any{}
	var list string // the key whose list items follow
	for _, l := range lines[1:end] {
		if item, ok := strings.CutPrefix(l, "- "); ok && list != "" {
			meta[list] = append(meta[list].([]string), yamlString(t, item))
			continue
		}
		k, v, ok := strings.Cut(l, ":")
		if !ok || k == "" || strings.HasPrefix(k, " ") {
			t.Fatalf("front matter line %q is not key: value", l)
		}
		if _, dup := meta[k]; dup {
			t.Fatalf("front matter key %q twice", k)
		}
		if v == "" {
			list, meta[k] = k, []string{}
			continue
		}
		list = ""
		if !strings.HasPrefix(v, " ") {
			t.Fatalf("front matter line %q: no blank after the colon", l)
		}
		meta[k] = yamlString(t, v[1:])
	}
	return meta, strings.Join(lines[end+1:], "\n")
}

// yamlString decodes a plain or double-quoted scalar.
func yamlString(t *testing.T, s string) string {
	t.Helper()
	if strings.HasPrefix(s, `"`) {
		v, err := strconv.Unquote(s)
		if err != nil {
			t.Fatalf("scalar %s: %v", s, err)
		}
		return v
	}
	if strings.ContainsAny(s, ":#'\"{}[],&*!|>%@`") {
		t.Fatalf("plain scalar %q holds a YAML indicator", s)
	}
	return s
}

func readCard(t *testing.T, pack string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(pack, dgq.CardName))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// auditClean fails unless the pack still audits clean (a layered one
// through the overlay loader): notes only, none about a file.
func auditClean(t *testing.T, pack string) {
	t.Helper()
	rep, err := overlay.Audit(context.Background(), pack, dgq.AuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || slices.ContainsFunc(rep.Findings, func(f dgq.Finding) bool { return f.Kind == dgq.KindFile }) {
		t.Fatalf("audit after card: ok %v, findings %v", rep.OK, rep.Findings)
	}
}

// TestCard writes the card of packs of several kinds and checks what the
// Hub reads (the front matter) and what a person reads (the body), that the
// pack still audits clean, and that a second run gives the same bytes.
func TestCard(t *testing.T) {
	_, snap := cardHub(t, baseCard)
	quantized := func(profile string, overlay bool, sets ...string) func(*testing.T) string {
		return func(t *testing.T) string { return cardPack(t, profile, overlay, sets...) }
	}
	cases := []struct {
		name, profile string
		pack          func(*testing.T) string
		repo          string
		want          []string // in the body
	}{
		{name: "q4", profile: "q4", pack: quantized("q4", false), repo: "someone/tiny-q4",
			want: []string{"| experts | q4 |", "dgq download someone/tiny-q4", "dgq run someone/tiny-q4 --prompt", "diffgemma ask -m dg-pack",
				"It runs on dgq and on the diffgemma engine.", "encoder `search`", "by dgq " + dgq.Version, "Every tensor carries a BLAKE3 digest",
				"| class | tensors | relative RMSE | max abs error |", "| embed | 1 | 0 | 0 |"}},
		{name: "bf16 is dgq-only and lossless", profile: "bf16", pack: quantized("bf16", false),
			want: []string{"runs on dgq only", "cannot run this pack", "the pack is lossless", "ORG/NAME` stands for this repository's id", "dgq download ORG/NAME"}},
		{name: "override", profile: "nvfp4x", pack: quantized("nvfp4x", false, "attn=q8"),
			want: []string{"with the overrides `attn=q8`", "| attn | q8 |", "| experts | nvfp4 |"}},
		{name: "layered", profile: "q4", pack: quantized("q4", true),
			want: []string{"**layered**", hfcache.DownloadHint(tinyRepo.Repo, tinyRepo.Revision), "The pack's own blob"}},
		// The engine records the snapshot's path as source_model: the repo is read from it.
		{name: "engine pack", profile: "q6", pack: func(t *testing.T) string {
			out := filepath.Join(t.TempDir(), "engine")
			if err := enginepack.Write(snap, out, enginepack.Options{Profile: "q6"}); err != nil {
				t.Fatal(err)
			}
			return out
		}, want: []string{"by a writer that records no `dgq` object", "carry no digests", "| experts | q6 |", "diffgemma ask",
			"does not record its quantization error"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pack := c.pack(t)
			res, err := dgq.Card(dgq.CardOptions{Pack: pack, Repo: c.repo})
			if err != nil {
				t.Fatal(err)
			}
			doc := readCard(t, pack)
			if res.Path != filepath.Join(pack, dgq.CardName) || res.Bytes != int64(len(doc)) || res.Replaced || res.VerifyIncluded ||
				res.BaseModel != tinyRepo.Repo || res.BaseRevision != tinyRepo.Revision || res.License != "apache-2.0" || res.Profile != c.profile {
				t.Errorf("result %+v", res)
			}
			meta, body := splitCard(t, doc)
			for k, v := range map[string]string{"base_model": tinyRepo.Repo, "base_model_relation": "quantized", "library_name": "dgq",
				"license": "apache-2.0", "license_link": "https://huggingface.co/" + tinyRepo.Repo + "/blob/" + tinyRepo.Revision + "/LICENSE",
				"pipeline_tag": "text-generation"} {
				if meta[k] != v {
					t.Errorf("front matter %s = %v, want %q", k, meta[k], v)
				}
			}
			tags, _ := meta["tags"].([]string)
			for _, tag := range []string{"dgq", "diffusiongemma", "quantized", c.profile} {
				if !slices.Contains(tags, tag) {
					t.Errorf("tags %v lack %q", tags, tag)
				}
			}
			if _, ok := meta["language"]; ok {
				t.Error("the card copied a key of the base model's card other than the licence")
			}
			for _, w := range append(c.want, "# diffusiongemma-tiny "+c.profile+" (.dgq)", "["+tinyRepo.Repo+"](https://huggingface.co/"+tinyRepo.Repo+")",
				"| class | format | tensors | parameters | size | bits per weight |", "| **total** |", "bits per weight** overall",
				"## Quantization error", "carries its licence, `apache-2.0`", "generated by `dgq card`") {
				if !strings.Contains(body, w) {
					t.Errorf("body lacks %q:\n%s", w, body)
				}
			}
			if strings.Contains(body, "Measured against the base model") {
				t.Error("a verify section without --verify")
			}
			if strings.Contains(string(doc), pack) || strings.Contains(string(doc), snap) {
				t.Error("the card holds a local path")
			}
			auditClean(t, pack)

			// Again: the same bytes, and the earlier card is replaced without --force.
			res2, err := dgq.Card(dgq.CardOptions{Pack: pack, Repo: c.repo})
			if err != nil {
				t.Fatal(err)
			}
			if again := readCard(t, pack); !bytes.Equal(again, doc) || !res2.Replaced {
				t.Errorf("second card differs (%v) or not marked replaced (%v)", !bytes.Equal(again, doc), res2.Replaced)
			}
			entries, _ := os.ReadDir(pack)
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".") {
					t.Errorf("temporary file %s left in the pack", e.Name())
				}
			}
		})
	}
}

// Without the base model's card at hand the card names no licence and says
// whose it is; the result notes why.
func TestCardLicenseUnknown(t *testing.T) {
	for name, readme := range map[string]string{
		"no README":             "",
		"no front matter":       "# tiny\n",
		"licence not a scalar":  "---\nlicense:\n- mit\n---\n",
		"licence given twice":   "---\nlicense: mit\nlicense: other\n---\n",
		"front matter not ends": "---\nlicense: mit\n",
	} {
		t.Run(name, func(t *testing.T) {
			cardHub(t, readme)
			pack := cardPack(t, "q4", false)
			res, err := dgq.Card(dgq.CardOptions{Pack: pack})
			if err != nil {
				t.Fatal(err)
			}
			meta, body := splitCard(t, readCard(t, pack))
			if _, ok := meta["license"]; ok || res.License != "" || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "no licence") {
				t.Errorf("license %v, result %q, notes %q", meta["license"], res.License, res.Notes)
			}
			if !strings.Contains(body, "its licence is the base model's") {
				t.Errorf("body does not name the licence's owner:\n%s", body)
			}
		})
	}
	// The base model gone from the cache: the note gives the download.
	_, snap := cardHub(t, baseCard)
	pack := cardPack(t, "q4", false)
	if err := os.RemoveAll(filepath.Dir(filepath.Dir(snap))); err != nil {
		t.Fatal(err)
	}
	res, err := dgq.Card(dgq.CardOptions{Pack: pack})
	if err != nil || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], hfcache.DownloadHint(tinyRepo.Repo, tinyRepo.Revision, dgq.CardName)) {
		t.Fatalf("base model not cached: %v, notes %q", err, res.Notes)
	}
}

// A licence that is not a plain word is quoted, and a name is carried.
func TestCardLicenseQuoted(t *testing.T) {
	cardHub(t, "---\nlicense: other\nlicense_name: 'gemma: terms # of use'\nlicense_link: https://ai.google.dev/gemma/terms\n---\n")
	pack := cardPack(t, "q4", false)
	if _, err := dgq.Card(dgq.CardOptions{Pack: pack}); err != nil {
		t.Fatal(err)
	}
	doc := readCard(t, pack)
	meta, body := splitCard(t, doc)
	if meta["license"] != "other" || meta["license_name"] != "gemma: terms # of use" || meta["license_link"] != "https://ai.google.dev/gemma/terms" {
		t.Errorf("front matter %v", meta)
	}
	if !strings.Contains(string(doc), `license_name: "gemma: terms # of use"`) || !strings.Contains(body, "<https://ai.google.dev/gemma/terms>") {
		t.Errorf("card:\n%s", doc)
	}
}

// writeReport writes a verify report for pack with the given changes (a
// key set to nil is removed).
func writeReport(t *testing.T, pack string, change map[string]any) string {
	t.Helper()
	rep := map[string]any{
		"pack": pack, "source": "/x", "source_kind": "snapshot", "backend": "cpu", "precision": "f32", "text": "random",
		"windows": 2, "prefix": 8, "canvas": 16, "noise_rates": []float64{0.5, 1}, "seed": 0, "positions": 128, "non_finite": 0,
		"kld": map[string]any{"mean": 0.125, "p99": 1.5, "p999": 2, "max": 3}, "top1_agreement": 0.875,
		"accuracy": map[string]any{"source": 0.5, "pack": 0.25}, "per_noise": []any{}, "layers": []any{}, "generation": nil, "notes": []string{},
	}
	for k, v := range change {
		if v == nil {
			delete(rep, k)
		} else {
			rep[k] = v
		}
	}
	b, _ := json.Marshal(rep)
	p := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A report whose pack is a copy of this pack (same manifest) is this
// pack's; one whose pack is gone is taken with a note.
func TestCardReportPack(t *testing.T) {
	cardHub(t, baseCard)
	pack := cardPack(t, "q4", false)
	cp := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(cp, os.DirFS(pack)); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		measured string
		note     bool
	}{
		"the pack":            {pack, false},
		"a copy":              {cp, false},
		"gone":                {filepath.Join(t.TempDir(), "moved-away"), true},
		"relative to the cwd": {"does/not/exist", true},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := dgq.Card(dgq.CardOptions{Pack: pack, VerifyReport: writeReport(t, c.measured, nil)})
			if err != nil {
				t.Fatal(err)
			}
			if !res.VerifyIncluded || (len(res.Notes) == 1) != c.note {
				t.Errorf("verify included %v, notes %q", res.VerifyIncluded, res.Notes)
			}
			_, body := splitCard(t, readCard(t, pack))
			for _, w := range []string{"## Measured against the base model", "| KL divergence, mean | 0.125 |", "| KL divergence, p99 | 1.5 |",
				"| top-1 agreement | 0.8750 |", "| accuracy vs the true tokens, base / pack | 0.5000 / 0.2500 |", "noise rates 0.5, 1", "128 positions"} {
				if !strings.Contains(body, w) {
					t.Errorf("body lacks %q:\n%s", w, body)
				}
			}
			if strings.Contains(body, c.measured) {
				t.Error("the card holds the report's local pack path")
			}
		})
	}
}

// Every refusal is one classed error and leaves the pack as it was: no
// README.md written or changed, no temporary file.
func TestCardErrors(t *testing.T) {
	root, _ := cardHub(t, baseCard)
	pack := cardPack(t, "q4", false)
	other := cardPack(t, "q6", false)
	empty := t.TempDir()

	inCache := filepath.Join(root, "packs", "q4")
	if err := os.CopyFS(inCache, os.DirFS(pack)); err != nil {
		t.Fatal(err)
	}
	// A pack repository in the cache, as dgq download or hf download leave it.
	const packRev = "0123456789abcdef0123456789abcdef01234567"
	packRepo := filepath.Join(root, "models--me--tiny-q4")
	if err := os.CopyFS(filepath.Join(packRepo, "snapshots", packRev), os.DirFS(pack)); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(packRepo, "refs"), 0o755)
	os.WriteFile(filepath.Join(packRepo, "refs", "main"), []byte(packRev), 0o644)
	// A pack quantized from a folder outside any cache records no repo.
	plain, err := testmodel.WriteSnapshot(filepath.Join(t.TempDir(), "snap"))
	if err != nil {
		t.Fatal(err)
	}
	noBase := filepath.Join(t.TempDir(), "nobase")
	if _, err := dgq.Quantize(context.Background(), dgq.QuantizeOptions{Source: plain, Out: noBase, Profile: "q4"}); err != nil {
		t.Fatal(err)
	}
	// A pack that breaks a rule: a tensor's size changed in the manifest.
	broken := filepath.Join(t.TempDir(), "broken")
	if err := os.CopyFS(broken, os.DirFS(pack)); err != nil {
		t.Fatal(err)
	}
	mb, _ := os.ReadFile(filepath.Join(broken, dgq.ManifestName))
	mb = bytes.Replace(mb, []byte(`"byte_len": `), []byte(`"byte_len": 1`), 1)
	os.WriteFile(filepath.Join(broken, dgq.ManifestName), mb, 0o644)

	notJSON := filepath.Join(t.TempDir(), "r.json")
	os.WriteFile(notJSON, []byte("KLD 0.1\n"), 0o644)
	errorObj := filepath.Join(t.TempDir(), "r.json")
	os.WriteFile(errorObj, []byte(`{"error": {"code": 2, "kind": "usage", "message": "dgq: verify: no source"}}`), 0o644)

	cases := []struct {
		name   string
		opts   dgq.CardOptions
		readme string // README.md in the pack before the run
		want   error
	}{
		{name: "no pack given", want: dgq.ErrUsage},
		{name: "missing folder", opts: dgq.CardOptions{Pack: filepath.Join(empty, "nope")}, want: dgq.ErrManifest},
		{name: "not a pack", opts: dgq.CardOptions{Pack: empty}, want: dgq.ErrManifest},
		{name: "a file", opts: dgq.CardOptions{Pack: notJSON}, want: dgq.ErrManifest},
		{name: "in the cache", opts: dgq.CardOptions{Pack: inCache}, want: dgq.ErrCardInCache},
		{name: "a pack repo in the cache", opts: dgq.CardOptions{Pack: "me/tiny-q4"}, want: dgq.ErrCardInCache},
		{name: "a model repo", opts: dgq.CardOptions{Pack: tinyRepo.Repo}, want: dgq.ErrManifest},
		{name: "broken pack", opts: dgq.CardOptions{Pack: broken}, want: dgq.ErrInvalid},
		{name: "no base model", opts: dgq.CardOptions{Pack: noBase}, want: dgq.ErrCardNoBase},
		{name: "base model given differs", opts: dgq.CardOptions{Pack: pack, BaseModel: "other/model"}, want: dgq.ErrUsage},
		{name: "base model malformed", opts: dgq.CardOptions{Pack: noBase, BaseModel: "no-slash"}, want: dgq.ErrUsage},
		{name: "bad repo", opts: dgq.CardOptions{Pack: pack, Repo: "not a repo"}, want: dgq.ErrUsage},
		{name: "repo with revision", opts: dgq.CardOptions{Pack: pack, Repo: "a/b@main"}, want: dgq.ErrUsage},
		{name: "report missing", opts: dgq.CardOptions{Pack: pack, VerifyReport: filepath.Join(empty, "r.json")}, want: dgq.ErrCardReport},
		{name: "report a folder", opts: dgq.CardOptions{Pack: pack, VerifyReport: empty}, want: dgq.ErrCardReport},
		{name: "report not JSON", opts: dgq.CardOptions{Pack: pack, VerifyReport: notJSON}, want: dgq.ErrCardReport},
		{name: "report an error object", opts: dgq.CardOptions{Pack: pack, VerifyReport: errorObj}, want: dgq.ErrCardReport},
		{name: "report without kld", opts: dgq.CardOptions{Pack: pack, VerifyReport: writeReport(t, pack, map[string]any{"kld": nil})}, want: dgq.ErrCardReport},
		{name: "report without pack", opts: dgq.CardOptions{Pack: pack, VerifyReport: writeReport(t, pack, map[string]any{"pack": nil})}, want: dgq.ErrCardReport},
		{name: "report top-1 > 1", opts: dgq.CardOptions{Pack: pack, VerifyReport: writeReport(t, pack, map[string]any{"top1_agreement": 2})}, want: dgq.ErrCardReport},
		{name: "report of another pack", opts: dgq.CardOptions{Pack: pack, VerifyReport: writeReport(t, other, nil)}, want: dgq.ErrCardReportPack},
		{name: "hand-written README", opts: dgq.CardOptions{Pack: pack}, readme: "# my card\n", want: dgq.ErrCardExists},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			readme := filepath.Join(pack, dgq.CardName)
			os.Remove(readme)
			if c.readme != "" {
				os.WriteFile(readme, []byte(c.readme), 0o644)
			}
			res, err := dgq.Card(c.opts)
			if !errors.Is(err, c.want) || res != nil {
				t.Fatalf("Card: %v, want %v", err, c.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			got, rerr := os.ReadFile(readme)
			if c.readme == "" && rerr == nil || c.readme != "" && string(got) != c.readme {
				t.Errorf("README.md written or changed: %q", got)
			}
			for _, dir := range []string{pack, inCache, filepath.Join(packRepo, "snapshots", packRev), noBase, broken} {
				if _, err := os.Stat(filepath.Join(dir, dgq.CardName)); err == nil && dir != pack {
					t.Errorf("README.md written into %s", dir)
				}
				entries, _ := os.ReadDir(dir)
				for _, e := range entries {
					if strings.HasPrefix(e.Name(), ".") {
						t.Errorf("temporary file %s left in %s", e.Name(), dir)
					}
				}
			}
		})
	}
	if _, err := dgq.Card(dgq.CardOptions{Pack: "me/tiny-q4"}); err == nil || !strings.Contains(err.Error(), "dgq download me/tiny-q4 --local-dir DIR") || !strings.Contains(err.Error(), "--out FILE") {
		t.Errorf("a cached pack repo: %v does not give the download to a folder", err)
	}
	if !errors.Is(dgq.ErrCardExists, dgq.ErrExists) {
		t.Error("ErrCardExists does not match ErrExists")
	}
}

// A pack that records no base model (quantized from a folder outside the
// cache) gets the one --base-model names, its licence looked up at that
// revision; one the pack records is kept and completed.
func TestCardBaseModelGiven(t *testing.T) {
	cardHub(t, baseCard)
	plain, err := testmodel.WriteSnapshot(filepath.Join(t.TempDir(), "local-dir"))
	if err != nil {
		t.Fatal(err)
	}
	pack := filepath.Join(t.TempDir(), "q4")
	if _, err := dgq.Quantize(context.Background(), dgq.QuantizeOptions{Source: plain, Out: pack, Profile: "q4"}); err != nil {
		t.Fatal(err)
	}
	for _, given := range []string{tinyRepo.Repo, tinyRepo.Repo + "@" + tinyRepo.Ref, tinyRepo.Repo + "@" + tinyRepo.Revision} {
		res, err := dgq.Card(dgq.CardOptions{Pack: pack, BaseModel: given})
		if err != nil {
			t.Fatalf("--base-model %s: %v", given, err)
		}
		meta, body := splitCard(t, readCard(t, pack))
		_, rev, _ := strings.Cut(given, "@")
		if meta["base_model"] != tinyRepo.Repo || res.BaseRevision != rev || res.License != "apache-2.0" || meta["license"] != "apache-2.0" {
			t.Errorf("--base-model %s: front matter %v, result %+v", given, meta, res)
		}
		if rev == "" && !strings.Contains(body, "(its revision is not recorded)") {
			t.Errorf("--base-model %s: body does not say the revision is unknown", given)
		}
	}
	// Given for a pack that records it: the same repo is accepted.
	recorded := cardPack(t, "q4", false)
	res, err := dgq.Card(dgq.CardOptions{Pack: recorded, BaseModel: tinyRepo.Repo + "@main"})
	if err != nil || res.BaseRevision != tinyRepo.Revision {
		t.Fatalf("--base-model of the recorded repo: %v %+v", err, res)
	}
}

// A README.md dgq card did not write is replaced only with Force; a folder
// of that name never is.
func TestCardForce(t *testing.T) {
	cardHub(t, baseCard)
	pack := cardPack(t, "q4", false)
	readme := filepath.Join(pack, dgq.CardName)
	os.WriteFile(readme, []byte("# mine\n"), 0o644)
	res, err := dgq.Card(dgq.CardOptions{Pack: pack, Force: true})
	if err != nil || !res.Replaced {
		t.Fatalf("Card --force: %v %+v", err, res)
	}
	if doc := readCard(t, pack); !strings.HasPrefix(string(doc), "---\nbase_model: ") {
		t.Fatalf("not replaced: %q", doc)
	}
	os.Remove(readme)
	os.Mkdir(readme, 0o755)
	if _, err := dgq.Card(dgq.CardOptions{Pack: pack, Force: true}); !errors.Is(err, dgq.ErrCardExists) {
		t.Fatalf("Card over a folder: %v", err)
	}
}
