package helmsource

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
)

var sha256Digest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// fetchArchive returns the chart of a Helm repository's archive, from the cache of
// loaded charts, else from the cache of archives, else downloaded: once for all the
// callers that want it at the same time.
func (c *Client) fetchArchive(ctx context.Context, src Source, repo repository, v Version) (*chart.Chart, error) {
	if v.URL == "" {
		return nil, &InvalidError{Msg: fmt.Sprintf("version %s has no archive URL", chartRef(v.Chart, v.Version))}
	}
	if v.Digest != "" && !sha256Digest.MatchString(v.Digest) {
		return nil, &InvalidError{Msg: fmt.Sprintf("digest %q of %s is not sha256:<64 lowercase hex>", v.Digest, chartRef(v.Chart, v.Version))}
	}
	key := "http " + v.URL + "@" + v.Digest + " " + c.credKey(src)
	if ch, ok := c.charts.Get(key); ok {
		return ch.(*chart.Chart), nil
	}
	return shared(ctx, &c.flight, "chart "+key, func(ctx context.Context) (*chart.Chart, error) {
		if ch, ok := c.charts.Get(key); ok {
			return ch.(*chart.Chart), nil
		}
		data, ok := c.archives.Get(key)
		if !ok {
			var err error
			if data, err = c.download(ctx, src, repo, v); err != nil {
				return nil, err
			}
			c.archives.Add(key, data)
		}
		// The loader's own bounds are per archive: the whole tree is bounded first.
		x := newExpansion(displayURL(v.URL), c.limits.MaxExpandedBytes)
		if err := x.archive(bytes.NewReader(data), 0, ""); err != nil {
			return nil, err
		}
		ch, err := loader.LoadArchive(bytes.NewReader(data))
		if err != nil {
			return nil, &InvalidError{Msg: fmt.Sprintf("%s is not a Helm chart archive: %v", displayURL(v.URL), err), Err: err}
		}
		if err := checkChart(ch, v); err != nil {
			return nil, err
		}
		c.charts.Add(key, ch)
		return ch, nil
	})
}

// download gets the archive, within MaxChartBytes, and checks it against the digest the
// index lists.
func (c *Client) download(ctx context.Context, src Source, repo repository, v Version) ([]byte, error) {
	client, err := c.httpClient(src, repo)
	if err != nil {
		return nil, err
	}
	shown := displayURL(v.URL)
	resp, err := get(ctx, client, v.URL, nil)
	if err != nil {
		return nil, err
	}
	defer closeBody(resp)
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, &AuthError{URL: shown, StatusCode: resp.StatusCode}
	case http.StatusNotFound:
		return nil, &NotFoundError{Msg: fmt.Sprintf("archive %s of %s not found", shown, chartRef(v.Chart, v.Version))}
	default:
		return nil, fmt.Errorf("GET %s: HTTP %d", shown, resp.StatusCode)
	}
	data, err := readBounded(resp, c.limits.MaxChartBytes, shown, "MaxChartBytes")
	if err != nil {
		return nil, err
	}
	c.chartFetches.Add(1)
	sum := sha256.Sum256(data)
	if got := "sha256:" + hex.EncodeToString(sum[:]); v.Digest != "" && got != v.Digest {
		return nil, &InvalidError{Msg: fmt.Sprintf("digest mismatch: the index lists %s for %s, the archive downloaded from %s is %s",
			v.Digest, chartRef(v.Chart, v.Version), shown, got)}
	}
	return data, nil
}

// checkChart refuses a chart that is not the one the version names.
func checkChart(ch *chart.Chart, v Version) error {
	if ch.Metadata == nil {
		return &InvalidError{Msg: fmt.Sprintf("%s has no Chart.yaml", chartRef(v.Chart, v.Version))}
	}
	if v.Chart != "" && ch.Name() != v.Chart {
		return &InvalidError{Msg: fmt.Sprintf("%s holds chart %q, not %q", displayURL(v.URL), ch.Name(), v.Chart)}
	}
	return nil
}
