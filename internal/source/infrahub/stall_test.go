package infrahub_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vidra-operator/vidra/internal/source/infrahub"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
)

// An Infrahub that trickles an answer is given up once a window brings less than the
// floor, rather than holding the sync (and the memory weighed for the answer) until the
// request's timeout; a client that waits for its share of the memory budget before it
// reads has not stalled.
func TestATricklingAnswerIsGivenUp(t *testing.T) {
	s := anonymous(t, 1, 4096)
	hc := *s.Client()
	hc.Timeout = time.Minute // far past the window: the floor, not the timeout, ends it
	c, err := infrahub.New(s.URL(), infrahub.Options{HTTPClient: &hc, StallWindow: 300 * time.Millisecond, MinBytesPerWindow: 1024})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	arts, err := c.ListArtifacts(ctx, mainBranch, "web", nil)
	if err != nil {
		t.Fatal(err)
	}

	s.SetFault(infrahubtest.Fault{Path: "/api/artifact/", Trickle: 50 * time.Millisecond})
	_, err = c.Download(ctx, mainBranch, arts[0], nil)
	if !errors.Is(err, infrahub.ErrStalled) || !strings.Contains(err.Error(), "fewer than the 1024 bytes every 300ms") {
		t.Fatalf("a trickled download: %v, want it given up as stalled", err)
	}
	s.SetFault(infrahubtest.Fault{})

	// Waiting three windows for memory held by another answer is no stall.
	budget := infrahub.NewBudget(8 * 4096)
	other := infrahub.NewQuota(infrahub.Limits{Budget: budget}, time.Now())
	if _, err := c.Download(ctx, mainBranch, arts[0], other); err != nil { // holds 8x its size: all of it
		t.Fatal(err)
	}
	time.AfterFunc(time.Second, other.Close)
	q := infrahub.NewQuota(infrahub.Limits{Budget: budget}, time.Now())
	defer q.Close()
	if _, err := c.Download(ctx, mainBranch, arts[0], q); err != nil {
		t.Fatalf("a download that waited for the memory budget: %v", err)
	}
}
