package helmsource

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"sigs.k8s.io/yaml"
)

// repoIndex is what Resolve needs of a repository's index.yaml, and how to ask whether
// it changed. It is never modified once cached: a refresh caches a new one.
type repoIndex struct {
	charts       map[string][]chartVersion // newest first
	etag         string
	lastModified string
	checked      time.Time
}

// chartVersion is one entry of the index.
type chartVersion struct {
	version string
	semver  *semver.Version
	urls    []string
	// digest is sha256:<hex>, "" when the index lists none; badDigest is one listed in
	// a form that cannot be checked.
	digest    string
	badDigest string
}

// indexFile is the part of index.yaml this package reads.
type indexFile struct {
	APIVersion string `json:"apiVersion"`
	Entries    map[string][]struct {
		Version string   `json:"version"`
		URLs    []string `json:"urls"`
		Digest  string   `json:"digest"`
	} `json:"entries"`
}

// index returns src's repository index, asking the repository only when the cached one
// is older than IndexMaxAge, and then with the validators it gave, so that an unchanged
// index costs a 304.
func (c *Client) index(ctx context.Context, src Source, repo repository) (*repoIndex, error) {
	key := repo.url + " " + c.credKey(src)
	if idx := c.cachedIndex(key); idx != nil && c.fresh(idx) {
		return idx, nil
	}
	return shared(ctx, &c.flight, "index "+key, func(ctx context.Context) (*repoIndex, error) {
		prev := c.cachedIndex(key)
		if prev != nil && c.fresh(prev) {
			return prev, nil // fetched while this caller waited its turn
		}
		idx, err := c.fetchIndex(ctx, src, repo, prev)
		if err != nil {
			return nil, err
		}
		c.indexes.Add(key, idx)
		return idx, nil
	})
}

func (c *Client) cachedIndex(key string) *repoIndex {
	v, ok := c.indexes.Get(key)
	if !ok {
		return nil
	}
	return v.(*repoIndex)
}

func (c *Client) fresh(idx *repoIndex) bool {
	return c.maxAge > 0 && c.now().Sub(idx.checked) < c.maxAge
}

func (c *Client) fetchIndex(ctx context.Context, src Source, repo repository, prev *repoIndex) (*repoIndex, error) {
	client, err := c.httpClient(src, repo)
	if err != nil {
		return nil, err
	}
	indexURL := repo.url + "/index.yaml"
	header := http.Header{}
	if prev != nil && prev.etag != "" {
		header.Set("If-None-Match", prev.etag)
	}
	if prev != nil && prev.lastModified != "" {
		header.Set("If-Modified-Since", prev.lastModified)
	}
	resp, err := get(ctx, client, indexURL, header)
	if err != nil {
		return nil, err
	}
	defer closeBody(resp)
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotModified:
		if prev == nil {
			return nil, fmt.Errorf("GET %s: HTTP 304 to a request without validators", indexURL)
		}
		refreshed := *prev
		refreshed.checked = c.now()
		return &refreshed, nil
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, &AuthError{URL: indexURL, StatusCode: resp.StatusCode}
	case http.StatusNotFound:
		return nil, &NotFoundError{Msg: fmt.Sprintf("%s not found: is %s a Helm repository?", indexURL, repo.url)}
	default:
		return nil, fmt.Errorf("GET %s: HTTP %d", indexURL, resp.StatusCode)
	}
	data, err := readBounded(resp, c.limits.MaxIndexBytes, indexURL, "MaxIndexBytes")
	if err != nil {
		return nil, err
	}
	c.indexFetches.Add(1)
	idx, err := parseIndex(data, indexURL)
	if err != nil {
		return nil, err
	}
	idx.etag = resp.Header.Get("ETag")
	idx.lastModified = resp.Header.Get("Last-Modified")
	idx.checked = c.now()
	return idx, nil
}

// readBounded reads resp's body up to max bytes, and never more than one byte past it:
// a larger body is a LimitError.
func readBounded(resp *http.Response, maxBytes int64, what, limit string) ([]byte, error) {
	if resp.ContentLength > maxBytes {
		return nil, &LimitError{What: what, Limit: limit, Max: maxBytes}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if int64(len(data)) > maxBytes {
		return nil, &LimitError{What: what, Limit: limit, Max: maxBytes}
	}
	return data, nil
}

var hexDigest = regexp.MustCompile(`^[0-9a-f]{64}$`)

// parseIndex keeps, of each chart, the versions that are semver (strict, after an
// optional "v", as tags.Newest reads them), newest first.
func parseIndex(data []byte, where string) (*repoIndex, error) {
	var f indexFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		return nil, &InvalidError{Msg: fmt.Sprintf("%s is not a Helm repository index: %v", where, err)}
	}
	if f.APIVersion == "" {
		return nil, &InvalidError{Msg: fmt.Sprintf("%s is not a Helm repository index: it has no apiVersion", where)}
	}
	idx := &repoIndex{charts: make(map[string][]chartVersion, len(f.Entries))}
	for name, entries := range f.Entries {
		versions := make([]chartVersion, 0, len(entries))
		for _, e := range entries {
			sv, err := semver.StrictNewVersion(strings.TrimPrefix(e.Version, "v"))
			if err != nil {
				continue
			}
			v := chartVersion{version: e.Version, semver: sv, urls: e.URLs}
			digest := strings.ToLower(strings.TrimPrefix(e.Digest, "sha256:"))
			switch {
			case e.Digest == "":
			case hexDigest.MatchString(digest):
				v.digest = "sha256:" + digest
			default:
				v.badDigest = e.Digest
			}
			versions = append(versions, v)
		}
		slices.SortFunc(versions, func(a, b chartVersion) int {
			if n := b.semver.Compare(a.semver); n != 0 {
				return n
			}
			return cmp.Compare(a.version, b.version)
		})
		idx.charts[name] = versions
	}
	return idx, nil
}
