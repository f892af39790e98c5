// Package helmsource resolves, fetches and renders Helm charts: from a Helm repository
// (index.yaml and archives over https) or an OCI registry, each chart version downloaded
// once however many callers want it, and rendered as `helm template` would, against
// exactly the capabilities of the cluster it is meant for.
package helmsource

import (
	"context"
	"crypto/rand"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"k8s.io/utils/lru"

	"github.com/vidra-operator/vidra/internal/runtime/bytelru"
	"github.com/vidra-operator/vidra/internal/source/ocisource"
)

// Source names a chart as a HelmSync's spec.source does.
type Source struct {
	// RepoURL is https://host/path (a Helm repository: index.yaml and archives), http://
	// (only with InsecureHTTP), or oci://host[:port]/path (the chart is RepoURL/Chart).
	RepoURL string
	Chart   string
	// Version is an exact version, a semver range, or "" for the newest stable version.
	Version string
	// Username and Password authenticate with HTTP basic auth: for the index, the
	// archives on the repository's own scheme, host and port, and the OCI registry.
	Username, Password string
	// CA is PEM certificates trusted in addition to the system's roots.
	CA           []byte
	InsecureHTTP bool
}

// Version is a resolved chart version.
type Version struct {
	Chart, Version string
	// URL is the absolute URL of the archive (Helm repository) or the OCI reference with
	// its digest (oci://host/path/chart@sha256:…).
	URL string
	// Digest is "sha256:<hex>": the archive's digest from index.yaml when it lists one,
	// or the OCI manifest digest; "" for an index without digests.
	Digest string
}

// Limits bound what a repository may cost; a field that is zero or less takes its
// default. An OCI chart is bounded as downloaded and extracted by the ocisource.Cache's
// own Limits, and then by MaxExpandedBytes.
type Limits struct {
	// MaxIndexBytes bounds index.yaml (default 32 MiB).
	MaxIndexBytes int64
	// MaxChartBytes bounds a chart archive as downloaded (default 16 MiB).
	MaxChartBytes int64
	// MaxExpandedBytes bounds a chart as loaded: its files, its subchart archives and
	// everything they expand to, all counted together (default 32 MiB).
	MaxExpandedBytes int64
}

const (
	defaultMaxIndexBytes = 32 << 20
	defaultMaxChartBytes = 16 << 20
	defaultIndexMaxAge   = 5 * time.Second

	// The caches of indexes and loaded charts are bounded by count, so the count is what
	// bounds their memory. At the default limits the worst case is 8 charts of up to
	// 32 MiB of files each (MaxExpandedBytes): 256 MiB, plus 16 indexes, each what was
	// kept (versions, URLs, digests) of up to 32 MiB of YAML (MaxIndexBytes).
	indexCacheEntries   = 16
	chartCacheEntries   = 8
	archiveCacheBytes   = 64 << 20
	transportCacheCount = 16
)

func (l Limits) withDefaults() Limits {
	if l.MaxIndexBytes <= 0 {
		l.MaxIndexBytes = defaultMaxIndexBytes
	}
	if l.MaxChartBytes <= 0 {
		l.MaxChartBytes = defaultMaxChartBytes
	}
	if l.MaxExpandedBytes <= 0 {
		l.MaxExpandedBytes = defaultMaxExpandedBytes
	}
	return l
}

// Options configure a Client.
type Options struct {
	Limits Limits
	// HTTPTimeout bounds each request to a Helm repository; zero leaves it to the
	// caller's context.
	HTTPTimeout time.Duration
	// OCI pulls charts from OCI registries; without it oci:// sources are refused.
	OCI *ocisource.Cache
	// IndexMaxAge is how long an index, once asked for, is used without asking again
	// (default 5s, so that many syncs of one repository make one request); a negative
	// age asks every time (with If-None-Match / If-Modified-Since).
	IndexMaxAge time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Client resolves and fetches charts; it is safe for concurrent use.
type Client struct {
	limits  Limits
	timeout time.Duration
	oci     *ocisource.Cache
	maxAge  time.Duration
	now     func() time.Time
	// salt keys the caches by credentials without keeping a plain hash of them.
	salt [32]byte

	indexes    *lru.Cache     // repository key → *repoIndex
	charts     *lru.Cache     // chart key → *chart.Chart
	archives   *bytelru.Cache // chart key → archive bytes
	transports *lru.Cache     // CA key → *http.Transport
	flight     singleflight.Group

	indexFetches atomic.Int64
	chartFetches atomic.Int64
}

// New returns a Client.
func New(opts Options) *Client {
	c := &Client{
		limits:   opts.Limits.withDefaults(),
		timeout:  opts.HTTPTimeout,
		oci:      opts.OCI,
		maxAge:   opts.IndexMaxAge,
		now:      opts.Now,
		indexes:  lru.New(indexCacheEntries),
		charts:   lru.New(chartCacheEntries),
		archives: bytelru.New(archiveCacheBytes),
		transports: lru.NewWithEvictionFunc(transportCacheCount, func(_ lru.Key, v any) {
			if t, ok := v.(*http.Transport); ok {
				t.CloseIdleConnections()
			}
		}),
	}
	if c.maxAge == 0 {
		c.maxAge = defaultIndexMaxAge
	}
	if c.now == nil {
		c.now = time.Now
	}
	_, _ = rand.Read(c.salt[:]) // never fails (crypto/rand documents it)
	return c
}

// IndexFetches is the number of index.yaml requests answered with a body (200).
func (c *Client) IndexFetches() int64 { return c.indexFetches.Load() }

// ChartFetches is the number of chart archives downloaded plus OCI pulls that
// downloaded.
func (c *Client) ChartFetches() int64 { return c.chartFetches.Load() }

// Resolve finds the chart version src names.
func (c *Client) Resolve(ctx context.Context, src Source) (Version, error) {
	repo, err := parseSource(src)
	if err != nil {
		return Version{}, err
	}
	if repo.oci {
		return c.resolveOCI(ctx, src, repo)
	}
	idx, err := c.index(ctx, src, repo)
	if err != nil {
		return Version{}, err
	}
	return idx.resolve(repo, src.Chart, src.Version, src.InsecureHTTP)
}

// Fetch returns the chart v names, downloading it only when no earlier Fetch did. The
// chart is shared with other callers and must not be modified (Render works on a copy).
func (c *Client) Fetch(ctx context.Context, src Source, v Version) (*chart.Chart, error) {
	repo, err := parseSource(src)
	if err != nil {
		return nil, err
	}
	if v.Chart != "" && v.Chart != src.Chart {
		return nil, &InvalidError{Msg: "version " + v.Chart + " " + v.Version + " is not of chart " + src.Chart}
	}
	if repo.oci {
		return c.fetchOCI(ctx, src, repo, v)
	}
	return c.fetchArchive(ctx, src, repo, v)
}

// chartRef is "chart version" for messages.
func chartRef(name, version string) string {
	return strings.TrimSpace(name + " " + version)
}
