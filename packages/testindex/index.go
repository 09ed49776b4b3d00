package testindex

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Wheel is one tiny distribution: its files (path in the wheel → content)
// besides the dist-info, which Build writes.
type Wheel struct {
	Name, Version string
	Files         map[string]string
	// Requires are Requires-Dist lines.
	Requires []string
	// WrongHash makes the index link carry a sha256 that is not the
	// file's.
	WrongHash bool
	// NoHash makes the index link carry no hash at all.
	NoHash bool
}

// Filename is the wheel's file name.
func (w Wheel) Filename() string {
	return fmt.Sprintf("%s-%s-py3-none-any.whl", distName(w.Name), w.Version)
}

func distName(n string) string { return regexp.MustCompile(`[-_.]+`).ReplaceAllString(n, "_") }

func normalize(n string) string {
	return strings.ToLower(regexp.MustCompile(`[-_.]+`).ReplaceAllString(n, "-"))
}

// Build returns the wheel's bytes: a zip with its files, METADATA, WHEEL
// and a RECORD with each file's sha256.
func (w Wheel) Build() []byte {
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	di := distName(w.Name) + "-" + w.Version + ".dist-info"
	meta := "Metadata-Version: 2.1\nName: " + w.Name + "\nVersion: " + w.Version + "\n"
	for _, r := range w.Requires {
		meta += "Requires-Dist: " + r + "\n"
	}
	files := map[string]string{}
	for k, v := range w.Files {
		files[k] = v
	}
	files[di+"/METADATA"] = meta
	files[di+"/WHEEL"] = "Wheel-Version: 1.0\nGenerator: pyjail-testindex\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
	names := make([]string, 0, len(files))
	for k := range files {
		names = append(names, k)
	}
	sort.Strings(names)
	var record strings.Builder
	for _, n := range names {
		f, _ := z.Create(n)
		_, _ = f.Write([]byte(files[n]))
		sum := sha256.Sum256([]byte(files[n]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", n, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[n]))
	}
	record.WriteString(di + "/RECORD,,\n")
	f, _ := z.Create(di + "/RECORD")
	_, _ = f.Write([]byte(record.String()))
	_ = z.Close()
	return buf.Bytes()
}

// Index is a running simple index. It is safe for concurrent use.
type Index struct {
	srv *httptest.Server

	mu    sync.Mutex
	files map[string][]byte            // file name → bytes
	links map[string]map[string]string // project → file name → fragment
	hits  map[string]int               // file name → downloads
}

// New starts an index on 127.0.0.1 serving wheels and sdists.
func New() *Index {
	ix := &Index{files: map[string][]byte{}, links: map[string]map[string]string{}, hits: map[string]int{}}
	ix.srv = httptest.NewServer(http.HandlerFunc(ix.serve))
	return ix
}

// URL is the index's base URL, http://127.0.0.1:PORT; the simple index
// is under /simple/.
func (ix *Index) URL() string { return ix.srv.URL }

// Close stops the index.
func (ix *Index) Close() { ix.srv.Close() }

// Add publishes wheels.
func (ix *Index) Add(ws ...Wheel) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, w := range ws {
		b := w.Build()
		sum := sha256.Sum256(b)
		frag := "#sha256=" + hex.EncodeToString(sum[:])
		switch {
		case w.WrongHash:
			other := sha256.Sum256(append(b, 'x'))
			frag = "#sha256=" + hex.EncodeToString(other[:])
		case w.NoHash:
			frag = ""
		}
		ix.publish(normalize(w.Name), w.Filename(), b, frag)
	}
}

// AddSdist publishes a source distribution only (its content is never
// meant to be built).
func (ix *Index) AddSdist(name, version string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	b := []byte("not really a tarball: a build must never be attempted")
	sum := sha256.Sum256(b)
	ix.publish(normalize(name), fmt.Sprintf("%s-%s.tar.gz", name, version), b, "#sha256="+hex.EncodeToString(sum[:]))
}

func (ix *Index) publish(project, file string, b []byte, frag string) {
	ix.files[file] = b
	if ix.links[project] == nil {
		ix.links[project] = map[string]string{}
	}
	ix.links[project][file] = frag
}

// Downloads returns how many times file was fetched.
func (ix *Index) Downloads(file string) int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.hits[file]
}

func (ix *Index) serve(w http.ResponseWriter, r *http.Request) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	p := r.URL.Path
	switch {
	case p == "/simple/" || p == "/simple":
		fmt.Fprint(w, "<!DOCTYPE html><html><body>")
		for proj := range ix.links {
			fmt.Fprintf(w, `<a href="/simple/%s/">%s</a>`, proj, proj)
		}
		fmt.Fprint(w, "</body></html>")
	case strings.HasPrefix(p, "/simple/"):
		proj := normalize(strings.Trim(strings.TrimPrefix(p, "/simple/"), "/"))
		links, ok := ix.links[proj]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!DOCTYPE html><html><body>")
		names := make([]string, 0, len(links))
		for f := range links {
			names = append(names, f)
		}
		sort.Strings(names)
		for _, f := range names {
			fmt.Fprintf(w, `<a href="/files/%s%s">%s</a><br/>`, html.EscapeString(f), links[f], html.EscapeString(f))
		}
		fmt.Fprint(w, "</body></html>")
	case strings.HasPrefix(p, "/files/"):
		f := strings.TrimPrefix(p, "/files/")
		b, ok := ix.files[f]
		if !ok {
			http.NotFound(w, r)
			return
		}
		ix.hits[f]++
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(b)
	default:
		http.NotFound(w, r)
	}
}

// AddFile publishes a real file (a wheel from /usr/share/python-wheels,
// say) under project with its true sha256.
func (ix *Index) AddFile(project, file string, b []byte) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	sum := sha256.Sum256(b)
	ix.publish(normalize(project), file, b, "#sha256="+hex.EncodeToString(sum[:]))
}
