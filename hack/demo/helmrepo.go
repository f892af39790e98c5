package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"sigs.k8s.io/yaml"
)

// chartRepo is a Helm repository on loopback serving the demo's own chart: index.yaml
// and the packaged chart, as any static chart repository does.
type chartRepo struct {
	url     string // the repository's address, a HelmSync's spec.source.repoURL
	chart   string // the chart's name
	version string
	server  *http.Server

	indexBodies  atomic.Int64 // index.yaml answered with a body
	indexUnmoved atomic.Int64 // index.yaml answered 304 Not Modified
	archiveGets  atomic.Int64
}

// indexFile is the part of a Helm repository's index.yaml a client reads.
type indexFile struct {
	APIVersion string                  `json:"apiVersion"`
	Entries    map[string][]indexEntry `json:"entries"`
	Generated  time.Time               `json:"generated"`
}

type indexEntry struct {
	APIVersion  string    `json:"apiVersion"`
	Name        string    `json:"name"`
	Version     string    `json:"version"`
	AppVersion  string    `json:"appVersion,omitempty"`
	Description string    `json:"description,omitempty"`
	Created     time.Time `json:"created"`
	Digest      string    `json:"digest"`
	URLs        []string  `json:"urls"`
}

// serveChart packages the chart in dir as `helm package` does, writes the archive into
// out, and serves it with its index from a new HTTP server on 127.0.0.1.
func serveChart(dir, out string) (*chartRepo, error) {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("load the chart %s: %w", dir, err)
	}
	file, err := chartutil.Save(ch, out)
	if err != nil {
		return nil, fmt.Errorf("package the chart %s: %w", dir, err)
	}
	archive, err := os.ReadFile(filepath.Clean(file))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(archive)
	now := time.Now().UTC().Truncate(time.Second)
	name := filepath.Base(file)
	index, err := yaml.Marshal(indexFile{
		APIVersion: "v1",
		Generated:  now,
		Entries: map[string][]indexEntry{ch.Name(): {{
			APIVersion: ch.Metadata.APIVersion, Name: ch.Name(), Version: ch.Metadata.Version,
			AppVersion: ch.Metadata.AppVersion, Description: ch.Metadata.Description,
			Created: now, Digest: hex.EncodeToString(sum[:]), URLs: []string{name},
		}}},
	})
	if err != nil {
		return nil, err
	}
	indexSum := sha256.Sum256(index)
	etag := `"` + hex.EncodeToString(indexSum[:8]) + `"`

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &chartRepo{url: "http://" + l.Addr().String() + "/charts", chart: ch.Name(), version: ch.Metadata.Version}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /charts/index.yaml", func(w http.ResponseWriter, req *http.Request) {
		// ServeContent answers If-None-Match and If-Modified-Since with 304, as static
		// servers do; the operator asks again with them.
		w.Header().Set("ETag", etag)
		w.Header().Set("Content-Type", "application/x-yaml")
		counting := &statusRecorder{ResponseWriter: w}
		http.ServeContent(counting, req, "index.yaml", now, bytes.NewReader(index))
		if counting.status == http.StatusNotModified {
			r.indexUnmoved.Add(1)
		} else {
			r.indexBodies.Add(1)
		}
	})
	mux.HandleFunc("GET /charts/"+name, func(w http.ResponseWriter, req *http.Request) {
		r.archiveGets.Add(1)
		w.Header().Set("Content-Type", "application/gzip")
		http.ServeContent(w, req, name, now, bytes.NewReader(archive))
	})
	r.server = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := r.server.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "demo: chart repository:", err)
		}
	}()
	return r, nil
}

func (r *chartRepo) close() { _ = r.server.Close() }

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}
