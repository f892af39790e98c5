package ocisource

import (
	"context"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/vidra-operator/vidra/internal/source/httpbound"
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
// maxTagPages, and gives each page to seen as it comes: a registry whose list never ends
// costs a bounded read, and no list of every tag is held (nor grown, copy after copy, to
// the bound). It returns how many tags were seen.
func (t *target) listTags(ctx context.Context, seen func(page []string)) (int, error) {
	budget := httpbound.NewBudget(maxTagListBytes)
	opts := t.optionsVia(ctx, httpbound.Transport{Inner: t.roundTripper(), Budget: budget})
	over := func() error {
		return &LimitError{Artifact: t.url + " tags", Limit: limitTagListBytes, Max: maxTagListBytes, Seen: budget.Spent()}
	}
	puller, err := remote.NewPuller(opts...)
	if err != nil {
		return 0, err
	}
	lister, err := puller.Lister(ctx, t.repo)
	if budget.Over() {
		return 0, over()
	}
	if err != nil {
		return 0, classify(err, t.url, "tags")
	}
	count := 0
	for pages := 0; lister.HasNext(); pages++ {
		if pages == maxTagPages {
			return 0, &LimitError{Artifact: t.url + " tags", Limit: limitTagPages, Max: maxTagPages, Seen: int64(pages)}
		}
		page, err := lister.Next(ctx)
		if budget.Over() {
			return 0, over()
		}
		if err != nil {
			return 0, classify(err, t.url, "tags")
		}
		count += len(page.Tags)
		seen(page.Tags)
	}
	return count, nil
}
