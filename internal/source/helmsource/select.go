package helmsource

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
	"golang.org/x/sync/singleflight"

	"github.com/vidra-operator/vidra/internal/source/tags"
)

// newestStable matches every version without a pre-release: Masterminds/semver leaves
// pre-releases out of a range that names none.
const newestStable = ">=0.0.0"

// maxAvailable is how many versions a NotFoundError lists.
const maxAvailable = 5

// resolve picks the version want names among the index's versions of chartName.
func (idx *repoIndex) resolve(repo repository, chartName, want string, insecure bool) (Version, error) {
	versions, ok := idx.charts[chartName]
	if !ok {
		return Version{}, &NotFoundError{Msg: fmt.Sprintf("chart %q not found in %s", chartName, repo.url)}
	}
	v, err := pick(versions, want)
	if err != nil {
		var nf *NotFoundError
		if errors.As(err, &nf) {
			nf.Msg = fmt.Sprintf("chart %q in %s: %s", chartName, repo.url, nf.Msg)
		}
		return Version{}, err
	}
	if v.badDigest != "" {
		return Version{}, &InvalidError{Msg: fmt.Sprintf("the index of %s lists digest %q for %s, which is not sha256:<hex>", repo.url, v.badDigest, chartRef(chartName, v.version))}
	}
	if len(v.urls) == 0 {
		return Version{}, &InvalidError{Msg: fmt.Sprintf("the index of %s lists no URL for %s", repo.url, chartRef(chartName, v.version))}
	}
	u, err := archiveURL(repo, v.urls[0], insecure)
	if err != nil {
		return Version{}, err
	}
	return Version{Chart: chartName, Version: v.version, URL: u, Digest: v.digest}, nil
}

// pick is the exact version want names ("v" or not), else the newest version within the
// range want is, else (want "") the newest without a pre-release.
func pick(versions []chartVersion, want string) (chartVersion, error) {
	want = strings.TrimSpace(want)
	if want != "" {
		for _, v := range versions {
			if v.version == want {
				return v, nil
			}
		}
		for _, v := range versions {
			if strings.TrimPrefix(v.version, "v") == strings.TrimPrefix(want, "v") {
				return v, nil
			}
		}
	}
	constraint := want
	if constraint == "" {
		constraint = newestStable
	}
	c, err := semver.NewConstraint(constraint)
	if err != nil {
		return chartVersion{}, &InvalidError{Msg: fmt.Sprintf("version %q is neither a version nor a semver range: %v", want, err)}
	}
	names := make([]string, len(versions))
	for i, v := range versions {
		names[i] = v.version
	}
	best, ok := tags.Newest(names, c)
	if !ok {
		what := fmt.Sprintf("no version matches %q", want)
		if want == "" {
			what = "no stable version (only pre-releases, which a range must name)"
		}
		return chartVersion{}, &NotFoundError{Msg: what, Available: available(versions)}
	}
	for _, v := range versions {
		if v.version == best {
			return v, nil
		}
	}
	return chartVersion{}, fmt.Errorf("version %q chosen but not listed", best)
}

func available(versions []chartVersion) []string {
	var out []string
	for _, v := range versions[:min(len(versions), maxAvailable)] {
		out = append(out, v.version)
	}
	return out
}

// shared runs fn once for all the callers that ask for key at the same time. A caller
// stops waiting when its context ends; if the caller whose context the run used gave up,
// the others ask again rather than inherit its cancellation.
func shared[T any](ctx context.Context, g *singleflight.Group, key string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	for attempt := 0; ; attempt++ {
		ch := g.DoChan(key, func() (any, error) { return fn(ctx) })
		select {
		case <-ctx.Done():
			return zero, fmt.Errorf("wait for a request another caller made: %w", ctx.Err())
		case r := <-ch:
			if r.Err != nil && attempt < 2 && ctx.Err() == nil &&
				(errors.Is(r.Err, context.Canceled) || errors.Is(r.Err, context.DeadlineExceeded)) {
				continue
			}
			if r.Err != nil {
				return zero, r.Err
			}
			return r.Val.(T), nil
		}
	}
}
