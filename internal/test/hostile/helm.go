package hostile

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"
)

// HostileTemplate asks Helm's engine for a string of 1.5 GB.
const HostileTemplate = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hostile\ndata:\n  big: {{ repeat 1500000000 \"x\" }}\n"

// HelmRepo is a Helm repository (index.yaml and one archive) holding chart "hostile"
// 1.0.0, whose one template is HostileTemplate.
func HelmRepo() (http.Handler, error) {
	archive, err := chartArchive([]file{
		{"hostile/Chart.yaml", "apiVersion: v2\nname: hostile\nversion: 1.0.0\n"},
		{"hostile/templates/hostile.yaml", HostileTemplate},
	})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(archive)
	index := fmt.Sprintf("apiVersion: v1\nentries:\n  hostile:\n  - apiVersion: v2\n    name: hostile\n    version: 1.0.0\n    urls: [charts/hostile-1.0.0.tgz]\n    digest: %s\n",
		hex.EncodeToString(sum[:]))
	mux := http.NewServeMux()
	mux.HandleFunc("/index.yaml", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(index))
	})
	mux.HandleFunc("/charts/hostile-1.0.0.tgz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(archive)
	})
	return mux, nil
}

type file struct{ name, content string }

// chartArchive packs files as helm package does: a gzipped tar.
func chartArchive(files []file) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		hdr := &tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.content)), ModTime: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(f.content)); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
