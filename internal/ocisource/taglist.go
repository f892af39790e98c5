package ocisource

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// A repository's tag list is read within these bounds, whatever the registry answers:
// the largest public repositories list some tens of thousands of tags, a few MiB of
// JSON, in tens of pages.
const (
	maxTagListBytes = 16 << 20
	maxTagPages     = 1000
)

// Names of the tag list's bounds in a LimitError.
const (
	limitTagListBytes = "MaxTagListBytes"
	limitTagPages     = "MaxTagListPages"
)

// listTags reads the repository's tag list, page by page, within maxTagListBytes and
// maxTagPages: a registry whose list never ends costs a bounded read.
func (t *target) listTags(ctx context.Context) ([]string, error) {
	budget := &readBudget{}
	budget.left.Store(maxTagListBytes)
	opts := append(t.options(ctx), remote.WithTransport(budgeted{inner: t.roundTripper(), budget: budget}))
	over := func() error {
		return &LimitError{Artifact: t.url + " tags", Limit: limitTagListBytes, Max: maxTagListBytes, Seen: maxTagListBytes - budget.left.Load()}
	}
	puller, err := remote.NewPuller(opts...)
	if err != nil {
		return nil, err
	}
	lister, err := puller.Lister(ctx, t.repo)
	if budget.over.Load() {
		return nil, over()
	}
	if err != nil {
		return nil, classify(err, t.url, "tags")
	}
	var tags []string
	for pages := 0; lister.HasNext(); pages++ {
		if pages == maxTagPages {
			return nil, &LimitError{Artifact: t.url + " tags", Limit: limitTagPages, Max: maxTagPages, Seen: int64(pages)}
		}
		page, err := lister.Next(ctx)
		if budget.over.Load() {
			return nil, over()
		}
		if err != nil {
			return nil, classify(err, t.url, "tags")
		}
		tags = append(tags, page.Tags...)
	}
	return tags, nil
}

// readBudget is what the responses of one listing may hold in all.
type readBudget struct {
	left atomic.Int64
	over atomic.Bool
}

// budgeted reads every response body within its budget.
type budgeted struct {
	inner  http.RoundTripper
	budget *readBudget
}

func (b budgeted) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.inner.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &budgetedBody{ReadCloser: resp.Body, budget: b.budget}
	return resp, nil
}

var errOverBudget = errors.New("the registry sent more than the listing's bound")

type budgetedBody struct {
	io.ReadCloser
	budget *readBudget
}

func (b *budgetedBody) Read(p []byte) (int, error) {
	left := b.budget.left.Load()
	if left <= 0 {
		// At the bound exactly, a body that ends there is within it.
		var probe [1]byte
		if n, err := b.ReadCloser.Read(probe[:]); n == 0 && errors.Is(err, io.EOF) {
			return 0, io.EOF
		}
		b.budget.over.Store(true)
		return 0, errOverBudget
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := b.ReadCloser.Read(p)
	b.budget.left.Add(-int64(n))
	return n, err
}
