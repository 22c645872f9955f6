package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/hfcache/hub"
)

func newDownloadCmd(e *env) *cobra.Command {
	var (
		o      hub.Options
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "download ORG/NAME[@REV] [--revision REV] [--include GLOB]... [--exclude GLOB]... [--local-dir DIR] [--json]",
		Short: "Fetch a model or pack repository from the Hugging Face Hub into the hub cache",
		Long: `download fetches the files of a Hub repository at a revision into the Hugging Face hub cache (HF_HUB_CACHE,
$HF_HOME/hub or ~/.cache/huggingface/hub), laid out exactly as huggingface_hub lays it out, so that
dgq quantize -m ORG/NAME, the hf CLI and transformers all find it; or, with --local-dir, into a plain folder.

Files are fetched in parallel, large files in ranged parts; an interrupted download resumes where it stopped;
every file is checked against the size and digest the Hub lists before it is published. The snapshot folder
is the last line printed. REV may be given as ORG/NAME@REV or --revision, not both with different values.
Environment: HF_ENDPOINT, HF_TOKEN (or the token file of hf auth login), HF_HUB_OFFLINE.

Exit codes: 0 the snapshot is complete; 2 usage (a malformed repo or revision, a repo, revision or file the Hub
does not have, a gated repo without access, nothing selected); 3 a file whose size or digest differs from the
Hub's listing; 4 offline and the cache lacks the files; 5 the network or the disk failed; 130 interrupted, 143 by SIGTERM (the
partial files stay for the next run).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Repo = args[0]
			o.Progress = newProgress(e)
			res, err := hub.Download(e.ctx, o)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(e.stdout, downloadJSON(res))
			}
			renderDownload(e.stdout, res)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&o.Revision, "revision", "", "branch, tag, refs/pr/N or 40-hex commit (default main)")
	f.StringArrayVar(&o.Include, "include", nil, "download only files matching this glob (repeatable; * matches / too)")
	f.StringArrayVar(&o.Exclude, "exclude", nil, "skip files matching this glob (repeatable)")
	f.StringVar(&o.LocalDir, "local-dir", "", "put the files in this folder instead of the hub cache")
	f.IntVar(&o.Connections, "connections", hub.DefaultConnections, "requests in flight at once")
	f.BoolVar(&asJSON, "json", false, "print the result (or the error) as one JSON object")
	return c
}

// downloadResult is download --json's output.
type downloadResult struct {
	Repo         string         `json:"repo"`
	Revision     string         `json:"revision"`
	Commit       string         `json:"commit"`
	Snapshot     string         `json:"snapshot"`
	LocalDir     bool           `json:"local_dir"`
	Offline      bool           `json:"offline"`
	Complete     bool           `json:"complete"`
	Files        []downloadFile `json:"files"`
	BytesFetched int64          `json:"bytes_fetched"`
	BytesTotal   int64          `json:"bytes_total"`
	ElapsedS     float64        `json:"elapsed_s"`
}

type downloadFile struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	LFS     bool   `json:"lfs"`
	ETag    string `json:"etag"`
	SHA256  string `json:"sha256,omitempty"`
	Fetched int64  `json:"fetched"`
	Action  string `json:"action"`
}

func downloadJSON(res *hub.Result) downloadResult {
	r := downloadResult{
		Repo: res.Repo, Revision: res.Revision, Commit: res.Commit, Snapshot: res.Snapshot, LocalDir: res.LocalDir,
		Offline: res.Offline, Complete: res.Complete, Files: []downloadFile{}, BytesFetched: res.BytesFetched,
		BytesTotal: res.BytesTotal, ElapsedS: res.Elapsed.Seconds(),
	}
	for _, f := range res.Files {
		r.Files = append(r.Files, downloadFile{Path: f.Path, Size: f.Size, LFS: f.LFS, ETag: f.ETag, SHA256: f.SHA256, Fetched: f.Fetched, Action: f.Action})
	}
	return r
}

// renderDownload prints one summary line, then the snapshot folder as the
// last line.
func renderDownload(w io.Writer, res *hub.Result) {
	rate := ""
	if s := res.Elapsed.Seconds(); s > 0 && res.BytesFetched > 0 {
		rate = fmt.Sprintf(" (%.1f MB/s)", float64(res.BytesFetched)/1e6/s)
	}
	note := ""
	switch {
	case res.Offline && !res.Complete:
		note = "; offline, no cached listing: completeness unknown"
	case res.Offline:
		note = "; offline, from the cache"
	}
	commit := res.Commit
	if commit == "" {
		commit = "unknown"
	}
	fmt.Fprintf(w, "%s@%s (commit %s): %d files, %.1f MB; fetched %.1f MB in %.1fs%s%s\n",
		res.Repo, res.Revision, commit, len(res.Files), float64(res.BytesTotal)/1e6, float64(res.BytesFetched)/1e6,
		res.Elapsed.Seconds(), rate, note)
	fmt.Fprintln(w, res.Snapshot)
}
