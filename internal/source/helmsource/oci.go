package helmsource

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/Masterminds/semver/v3"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"

	"github.com/vidra-operator/vidra/internal/source/ocisource"
)

// ociRemote is where src's chart lives in its registry: the repository RepoURL/Chart,
// as `helm push` names it.
func (c *Client) ociRemote(src Source, repo repository) (ocisource.Remote, error) {
	if c.oci == nil {
		return ocisource.Remote{}, &InvalidError{Msg: "charts from OCI registries are not enabled in this operator"}
	}
	return ocisource.Remote{
		URL:      repo.url + "/" + src.Chart,
		Username: src.Username, Password: src.Password,
		CA: src.CA, InsecureHTTP: src.InsecureHTTP,
	}, nil
}

// resolveOCI finds the tag src.Version names: an exact version is its tag (with "+"
// written "_", as Helm pushes build metadata), anything else a semver range over the
// repository's tags.
func (c *Client) resolveOCI(ctx context.Context, src Source, repo repository) (Version, error) {
	remote, err := c.ociRemote(src, repo)
	if err != nil {
		return Version{}, err
	}
	want := strings.TrimSpace(src.Version)
	var rev ocisource.Revision
	switch {
	case want == "":
		rev, err = c.oci.Resolve(ctx, remote, ocisource.Ref{SemVer: newestStable})
	case isVersion(want):
		rev, err = c.resolveOCITag(ctx, remote, want)
	default:
		rev, err = c.oci.Resolve(ctx, remote, ocisource.Ref{SemVer: want})
	}
	if err != nil {
		return Version{}, fromOCI(err)
	}
	return Version{
		Chart:   src.Chart,
		Version: strings.ReplaceAll(rev.Tag, "_", "+"),
		URL:     remote.URL + "@" + rev.Digest,
		Digest:  rev.Digest,
	}, nil
}

// resolveOCITag resolves the tag of version, and when there is none, the same version
// with or without a "v".
func (c *Client) resolveOCITag(ctx context.Context, remote ocisource.Remote, version string) (ocisource.Revision, error) {
	tag := strings.ReplaceAll(version, "+", "_")
	rev, err := c.oci.Resolve(ctx, remote, ocisource.Ref{Tag: tag})
	var notFound *ocisource.NotFoundError
	if !errors.As(err, &notFound) {
		return rev, err
	}
	other := "v" + tag
	if strings.HasPrefix(tag, "v") {
		other = strings.TrimPrefix(tag, "v")
	}
	if rev, otherErr := c.oci.Resolve(ctx, remote, ocisource.Ref{Tag: other}); otherErr == nil {
		return rev, nil
	}
	return rev, err
}

func isVersion(s string) bool {
	_, err := semver.StrictNewVersion(strings.TrimPrefix(s, "v"))
	return err == nil
}

// fetchOCI pulls the chart's artifact through the OCI cache (one download per digest)
// and loads the chart directory it holds.
func (c *Client) fetchOCI(ctx context.Context, src Source, repo repository, v Version) (*chart.Chart, error) {
	remote, err := c.ociRemote(src, repo)
	if err != nil {
		return nil, err
	}
	if !sha256Digest.MatchString(v.Digest) {
		return nil, &InvalidError{Msg: fmt.Sprintf("digest %q of %s is not sha256:<64 lowercase hex>", v.Digest, chartRef(v.Chart, v.Version))}
	}
	key := "oci " + remote.URL + "@" + v.Digest + " " + c.credKey(src)
	if ch, ok := c.charts.Get(key); ok {
		return ch.(*chart.Chart), nil
	}
	return shared(ctx, &c.flight, "chart "+key, func(ctx context.Context) (*chart.Chart, error) {
		if ch, ok := c.charts.Get(key); ok {
			return ch.(*chart.Chart), nil
		}
		before := c.oci.Pulls()
		dir, release, err := c.oci.Pull(ctx, remote, ocisource.Revision{Digest: v.Digest})
		if err != nil {
			return nil, fromOCI(err)
		}
		defer release()
		if c.oci.Pulls() > before {
			c.chartFetches.Add(1)
		}
		chartDir, err := chartDirIn(dir, src.Chart)
		if err != nil {
			return nil, &InvalidError{Msg: fmt.Sprintf("%s@%s is not a Helm chart: %v", remote.URL, v.Digest, err)}
		}
		// ocisource bounds the extracted files, not the subchart archives among them.
		x := newExpansion(remote.URL+"@"+v.Digest, c.limits.MaxExpandedBytes)
		if err := x.dir(chartDir, ""); err != nil {
			return nil, err
		}
		ch, err := loader.LoadDir(chartDir)
		if err != nil {
			return nil, &InvalidError{Msg: fmt.Sprintf("%s@%s is not a Helm chart: %v", remote.URL, v.Digest, err), Err: err}
		}
		if err := checkChart(ch, Version{Chart: src.Chart, Version: v.Version, URL: remote.URL}); err != nil {
			return nil, err
		}
		c.charts.Add(key, ch)
		return ch, nil
	})
}

// chartDirIn is the chart directory of an extracted chart archive: the directory named
// after the chart, else the only directory holding a Chart.yaml.
func chartDirIn(dir, name string) (string, error) {
	if _, err := os.Stat(filepath.Join(dir, name, "Chart.yaml")); err == nil {
		return filepath.Join(dir, name), nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("read the artifact: %w", err)
	}
	var found []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "Chart.yaml")); e.IsDir() && err == nil {
			found = append(found, e.Name())
		}
	}
	if len(found) != 1 {
		return "", fmt.Errorf("it holds %d chart directories, not one", len(found))
	}
	return filepath.Join(dir, found[0]), nil
}
