// Package hubtest is a loopback stand-in for the Hugging Face Hub, for
// tests: an httptest server that answers the requests a download makes as
// the Hub does (revision info, a paginated recursive tree listing, file
// bytes with Range support, LFS files redirected to a second loopback host
// standing in for the CDN, and the Hub's error headers), with faults to
// inject (connections cut mid-body, transient statuses, wrong bytes, a
// stalled body) and counters of what was served. Only tests import it; it
// is not linked into the dgq binary.
package hubtest

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// File is a file of a fake repository.
type File struct {
	Path string
	Data []byte
	// LFS stores the file in LFS: the tree lists its sha256 and its bytes
	// are served by the CDN after a redirect.
	LFS bool
}

// Repo is a fake repository with one commit.
type Repo struct {
	// ID is "org/name".
	ID string
	// Commit is the 40-hex commit; empty: derived from ID.
	Commit string
	// Refs maps branch, tag or "refs/pr/N" names to the commit; "main" is
	// always there.
	Refs []string
	// Files are the repository's files.
	Files []File
	// Token, when set, gates the repository: file bytes are served only to
	// requests carrying "Authorization: Bearer <Token>" (401 without one,
	// 403 with another, both with X-Error-Code GatedRepo).
	Token string
}

// Fault is what goes wrong with the answers for one file.
type Fault struct {
	// CutAfter, Cuts: the next Cuts answers close the connection after
	// CutAfter bytes of body.
	CutAfter int64
	Cuts     int
	// Status, StatusTimes: the next StatusTimes answers are this status
	// (e.g. 503), with X-Error-Code Code when it is set.
	Status      int
	StatusTimes int
	Code        string
	// Corrupt flips one byte of the content in every answer.
	Corrupt bool
	// StallAfter, when positive, makes every answer stop after this many
	// bytes and hold the connection open until the client goes away;
	// Stalled is closed the first time that happens.
	StallAfter int64
	Stalled    chan struct{}
}

// Request is one request the server saw.
type Request struct {
	// CDN is set for a request to the CDN host.
	CDN bool
	// Method, Path (unescaped) and RawQuery of the request.
	Method, Path, RawQuery string
	// Range is the Range header; Auth the Authorization header.
	Range, Auth string
	// File is the repo file a resolve or CDN request was for
	// ("org/name:path"), else "".
	File string
	// Status is the status answered.
	Status int
	// Bytes is the body bytes of file content written.
	Bytes int64
}

// Server is the fake Hub and its CDN.
type Server struct {
	// Hub is the Hub (its URL is the endpoint); CDN the LFS host.
	Hub, CDN *httptest.Server
	// PageSize is the tree listing's page size (default 1000).
	PageSize int
	// Latency delays every file answer before its headers.
	Latency time.Duration
	// IgnoreRange answers every file request with the whole content (200),
	// as a server without Range support does.
	IgnoreRange bool

	mu          sync.Mutex
	repos       map[string]*repoState
	faults      map[string]*Fault
	apiFaults   []int
	log         []Request
	served      map[string]int64
	inFlight    int
	maxInFlight int
	fileFlight  map[string]int
	maxFile     map[string]int
}

type repoState struct {
	Repo
	byPath map[string]*fileState
	bySHA  map[string]*fileState
	paths  []string // files and folders, sorted
}

type fileState struct {
	File
	key     string
	sha1    string // git blob id of the content
	sha256  string
	pointer []byte // the LFS pointer text
}

// New starts a fake Hub serving repos. Close it when done.
func New(repos ...Repo) *Server {
	s := &Server{
		PageSize:   1000,
		repos:      map[string]*repoState{},
		faults:     map[string]*Fault{},
		served:     map[string]int64{},
		fileFlight: map[string]int{},
		maxFile:    map[string]int{},
	}
	for _, r := range repos {
		s.AddRepo(r)
	}
	s.Hub = httptest.NewServer(http.HandlerFunc(s.serveHub))
	s.CDN = httptest.NewServer(http.HandlerFunc(s.serveCDN))
	return s
}

// AddRepo adds (or replaces) a repository.
func (s *Server) AddRepo(r Repo) {
	if r.Commit == "" {
		h := sha1.Sum([]byte("commit of " + r.ID))
		r.Commit = hex.EncodeToString(h[:])
	}
	if !slices.Contains(r.Refs, "main") {
		r.Refs = append(r.Refs, "main")
	}
	st := &repoState{Repo: r, byPath: map[string]*fileState{}, bySHA: map[string]*fileState{}}
	dirs := map[string]bool{}
	for _, f := range r.Files {
		fs := &fileState{File: f, key: r.ID + ":" + f.Path, sha1: GitBlobID(f.Data)}
		s256 := sha256.Sum256(f.Data)
		fs.sha256 = hex.EncodeToString(s256[:])
		fs.pointer = []byte(fmt.Sprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", fs.sha256, len(f.Data)))
		st.byPath[f.Path] = fs
		if f.LFS {
			st.bySHA[fs.sha256] = fs
		}
		st.paths = append(st.paths, f.Path)
		for i := strings.IndexByte(f.Path, '/'); i >= 0; i = nextSlash(f.Path, i) {
			dirs[f.Path[:i]] = true
		}
	}
	for d := range dirs {
		st.paths = append(st.paths, d)
	}
	slices.Sort(st.paths)
	s.mu.Lock()
	s.repos[r.ID] = st
	s.mu.Unlock()
}

func nextSlash(p string, i int) int {
	j := strings.IndexByte(p[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// Close shuts both servers down.
func (s *Server) Close() {
	s.Hub.Close()
	s.CDN.Close()
}

// URL is the Hub's endpoint URL.
func (s *Server) URL() string { return s.Hub.URL }

// CommitOf returns the commit of a repository.
func (s *Server) CommitOf(repo string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.repos[repo]; r != nil {
		return r.Commit
	}
	return ""
}

// SetFault sets the fault of a repo file ("org/name", "path"); nil clears
// it.
func (s *Server) SetFault(repo, path string, f *Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f == nil {
		delete(s.faults, repo+":"+path)
		return
	}
	s.faults[repo+":"+path] = f
}

// FailAPI makes the next API requests (revision, tree) answer these
// statuses, one each.
func (s *Server) FailAPI(statuses ...int) {
	s.mu.Lock()
	s.apiFaults = append(s.apiFaults, statuses...)
	s.mu.Unlock()
}

// Requests returns the requests seen so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// Served returns the content bytes served for a repo file.
func (s *Server) Served(repo, path string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served[repo+":"+path]
}

// TotalServed returns the content bytes served for every file.
func (s *Server) TotalServed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, v := range s.served {
		n += v
	}
	return n
}

// MaxInFlight returns the most file answers that were in progress at
// once, over all files.
func (s *Server) MaxInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxInFlight
}

// MaxInFlightFile returns the most answers for one file in progress at
// once.
func (s *Server) MaxInFlightFile(repo, path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxFile[repo+":"+path]
}

// ResetStats forgets the requests and counters (not the faults).
func (s *Server) ResetStats() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log, s.served = nil, map[string]int64{}
	s.maxInFlight, s.maxFile = 0, map[string]int{}
}

// GitBlobID is the git blob id of data: sha1("blob <len>\x00" + data).
func GitBlobID(data []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// SHA256 is the hex sha256 of data.
func SHA256(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// record appends a request to the log.
func (s *Server) record(r Request) {
	s.mu.Lock()
	s.log = append(s.log, r)
	s.mu.Unlock()
}

// hubError answers a failure as the Hub does: status, X-Error-Code and
// X-Error-Message headers, a JSON body.
func hubError(w http.ResponseWriter, status int, code, msg string) {
	if code != "" {
		w.Header().Set("X-Error-Code", code)
	}
	w.Header().Set("X-Error-Message", msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// segments splits an escaped path into unescaped elements.
func segments(escaped string) ([]string, bool) {
	els := strings.Split(strings.TrimPrefix(escaped, "/"), "/")
	for i, el := range els {
		u, err := url.PathUnescape(el)
		if err != nil {
			return nil, false
		}
		els[i] = u
	}
	return els, true
}

func (s *Server) serveHub(w http.ResponseWriter, r *http.Request) {
	rec := Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Range: r.Header.Get("Range"), Auth: r.Header.Get("Authorization")}
	sw := &statusWriter{ResponseWriter: w, status: 200}
	defer func() { rec.Status = sw.status; s.record(rec) }()
	els, ok := segments(r.URL.EscapedPath())
	if !ok {
		hubError(sw, 400, "", "bad path")
		return
	}
	if len(els) >= 5 && els[0] == "api" && els[1] == "models" {
		s.mu.Lock()
		var fault int
		if len(s.apiFaults) > 0 {
			fault, s.apiFaults = s.apiFaults[0], s.apiFaults[1:]
		}
		s.mu.Unlock()
		if fault != 0 {
			hubError(sw, fault, "", "injected failure")
			return
		}
		repo := s.repo(els[2] + "/" + els[3])
		if repo == nil {
			repoNotFound(sw, rec.Auth != "")
			return
		}
		switch {
		case els[4] == "revision" && len(els) == 6:
			s.serveRevision(sw, repo, els[5])
		case els[4] == "tree" && len(els) >= 6:
			s.serveTree(sw, r, repo, els[5], strings.Join(els[6:], "/"))
		default:
			hubError(sw, 404, "", "Not found")
		}
		return
	}
	if len(els) >= 5 && els[2] == "resolve" {
		repo := s.repo(els[0] + "/" + els[1])
		if repo == nil {
			repoNotFound(sw, rec.Auth != "")
			return
		}
		if !repo.hasRev(els[3]) {
			hubError(sw, 404, "RevisionNotFound", "Invalid rev id: "+els[3])
			return
		}
		if repo.Token != "" && rec.Auth != "Bearer "+repo.Token {
			status := 401
			if rec.Auth != "" {
				status = 403
			}
			hubError(sw, status, "GatedRepo", "Access to model "+repo.ID+" is restricted. You must have access to it and be authenticated to access it. Please log in.")
			return
		}
		f := repo.byPath[strings.Join(els[4:], "/")]
		if f == nil {
			hubError(sw, 404, "EntryNotFound", "Entry not found")
			return
		}
		rec.File = f.key
		w.Header().Set("X-Repo-Commit", repo.Commit)
		if f.LFS {
			w.Header().Set("X-Linked-Etag", `"`+f.sha256+`"`)
			w.Header().Set("X-Linked-Size", strconv.Itoa(len(f.Data)))
			w.Header().Set("ETag", `"`+GitBlobID(f.pointer)+`"`)
			w.Header().Set("Location", s.CDN.URL+"/lfs/"+f.sha256+"?X-Amz-Signature=fake&Expires=1")
			sw.WriteHeader(http.StatusFound)
			return
		}
		w.Header().Set("ETag", `"`+f.sha1+`"`)
		rec.Bytes = s.serveBytes(sw, r, f)
		return
	}
	hubError(sw, 404, "", "Not found")
}

func (s *Server) serveCDN(w http.ResponseWriter, r *http.Request) {
	rec := Request{CDN: true, Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Range: r.Header.Get("Range"), Auth: r.Header.Get("Authorization")}
	sw := &statusWriter{ResponseWriter: w, status: 200}
	defer func() { rec.Status = sw.status; s.record(rec) }()
	sha, ok := strings.CutPrefix(r.URL.Path, "/lfs/")
	var f *fileState
	if ok {
		s.mu.Lock()
		for _, repo := range s.repos {
			if f = repo.bySHA[sha]; f != nil {
				break
			}
		}
		s.mu.Unlock()
	}
	if f == nil || r.URL.Query().Get("X-Amz-Signature") == "" {
		http.Error(sw, "AccessDenied", http.StatusForbidden)
		return
	}
	rec.File = f.key
	w.Header().Set("ETag", `"`+f.sha256+`"`)
	rec.Bytes = s.serveBytes(sw, r, f)
}

func repoNotFound(w http.ResponseWriter, authed bool) {
	status := 401
	if authed {
		status = 404
	}
	hubError(w, status, "RepoNotFound", "Repository not found")
}

func (s *Server) repo(id string) *repoState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.repos[id]
}

func (r *repoState) hasRev(rev string) bool {
	return rev == r.Commit || slices.Contains(r.Refs, rev)
}

func (s *Server) serveRevision(w http.ResponseWriter, repo *repoState, rev string) {
	if !repo.hasRev(rev) {
		hubError(w, 404, "RevisionNotFound", "Invalid rev id: "+rev)
		return
	}
	siblings := []map[string]string{}
	for _, f := range repo.Files {
		siblings = append(siblings, map[string]string{"rfilename": f.Path})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"_id": "fake", "id": repo.ID, "modelId": repo.ID, "sha": repo.Commit, "private": false,
		"gated": map[bool]any{true: "auto", false: false}[repo.Token != ""], "siblings": siblings,
	})
}

func (s *Server) serveTree(w http.ResponseWriter, r *http.Request, repo *repoState, rev, under string) {
	if !repo.hasRev(rev) {
		hubError(w, 404, "RevisionNotFound", "Invalid rev id: "+rev)
		return
	}
	if r.URL.Query().Get("recursive") != "true" {
		hubError(w, 400, "", "this stand-in only lists recursively")
		return
	}
	var entries []map[string]any
	for _, p := range repo.paths {
		if under != "" && !strings.HasPrefix(p, under+"/") {
			continue
		}
		if f := repo.byPath[p]; f != nil {
			e := map[string]any{"type": "file", "oid": f.sha1, "size": len(f.Data), "path": p}
			if f.LFS {
				e["oid"] = GitBlobID(f.pointer)
				e["lfs"] = map[string]any{"oid": f.sha256, "size": len(f.Data), "pointerSize": len(f.pointer)}
			}
			entries = append(entries, e)
		} else {
			h := sha1.Sum([]byte("tree " + p))
			entries = append(entries, map[string]any{"type": "directory", "oid": hex.EncodeToString(h[:]), "size": 0, "path": p})
		}
	}
	start := 0
	if c := r.URL.Query().Get("cursor"); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil || n < 0 || n > len(entries) {
			hubError(w, 400, "", "bad cursor")
			return
		}
		start = n
	}
	page := max(s.PageSize, 1)
	end := min(start+page, len(entries))
	if end < len(entries) {
		q := r.URL.Query()
		q.Set("cursor", strconv.Itoa(end))
		next := s.Hub.URL + r.URL.EscapedPath() + "?" + q.Encode()
		w.Header().Set("Link", "<"+next+`>; rel="next"`)
	}
	w.Header().Set("Content-Type", "application/json")
	out := entries[start:end]
	if out == nil {
		out = []map[string]any{}
	}
	json.NewEncoder(w).Encode(out)
}

// parseRange reads "bytes=a-b" or "bytes=a-" against size.
func parseRange(h string, size int64) (from, to int64, ok bool) {
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found || strings.Contains(spec, ",") {
		return 0, 0, false
	}
	a, b, found := strings.Cut(spec, "-")
	if !found || a == "" {
		return 0, 0, false
	}
	from, err := strconv.ParseInt(a, 10, 64)
	if err != nil || from < 0 || from >= size {
		return 0, 0, false
	}
	to = size
	if b != "" {
		last, err := strconv.ParseInt(b, 10, 64)
		if err != nil || last < from {
			return 0, 0, false
		}
		to = min(last+1, size)
	}
	return from, to, true
}

// serveBytes answers a file's content (whole or ranged), applying its
// fault, and returns the content bytes written.
func (s *Server) serveBytes(w http.ResponseWriter, r *http.Request, f *fileState) int64 {
	s.mu.Lock()
	fault := s.faults[f.key]
	var status, cutAfter int64 = 0, -1
	corrupt, stallAfter, code := false, int64(0), ""
	var stalled chan struct{}
	if fault != nil {
		if fault.StatusTimes > 0 {
			fault.StatusTimes--
			status, code = int64(fault.Status), fault.Code
		} else if fault.Cuts > 0 {
			fault.Cuts--
			cutAfter = fault.CutAfter
		}
		corrupt, stallAfter, stalled = fault.Corrupt, fault.StallAfter, fault.Stalled
	}
	s.inFlight++
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
	s.fileFlight[f.key]++
	s.maxFile[f.key] = max(s.maxFile[f.key], s.fileFlight[f.key])
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.fileFlight[f.key]--
		s.mu.Unlock()
	}()
	if s.Latency > 0 {
		time.Sleep(s.Latency)
	}
	if status != 0 {
		hubError(w, int(status), code, "injected failure")
		return 0
	}
	data := f.Data
	if corrupt && len(data) > 0 {
		data = slices.Clone(data)
		data[len(data)/2] ^= 0x5a
	}
	size := int64(len(data))
	from, to := int64(0), size
	w.Header().Set("Accept-Ranges", "bytes")
	w.Header().Set("Content-Type", "application/octet-stream")
	if h := r.Header.Get("Range"); h != "" && !s.IgnoreRange {
		var ok bool
		if from, to, ok = parseRange(h, size); !ok {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", size))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return 0
		}
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, to-1, size))
		w.Header().Set("Content-Length", strconv.FormatInt(to-from, 10))
		w.WriteHeader(http.StatusPartialContent)
	} else {
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		w.WriteHeader(http.StatusOK)
	}
	if r.Method == http.MethodHead {
		return 0
	}
	var written int64
	flusher, _ := w.(http.Flusher)
	for off := from; off < to; {
		n := min(int64(32<<10), to-off)
		stop := false
		if cutAfter >= 0 && written+n >= cutAfter {
			n, stop = cutAfter-written, true
		}
		if stallAfter > 0 && written+n >= stallAfter {
			n = stallAfter - written
		}
		m, err := w.Write(data[off : off+n])
		written += int64(m)
		s.mu.Lock()
		s.served[f.key] += int64(m)
		s.mu.Unlock()
		if err != nil {
			return written
		}
		off += n
		if flusher != nil {
			flusher.Flush()
		}
		if stop {
			panic(http.ErrAbortHandler) // cut the connection mid-body
		}
		if stallAfter > 0 && written >= stallAfter {
			if stalled != nil {
				s.mu.Lock()
				select {
				case <-stalled:
				default:
					close(stalled)
				}
				s.mu.Unlock()
			}
			<-r.Context().Done()
			return written
		}
	}
	return written
}

// statusWriter remembers the status written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Flush passes flushes through.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
