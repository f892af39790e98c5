package infrahub_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vidra-operator/vidra/internal/source/infrahub"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
)

// anonymous is a double anonymous readers may read, with n artifacts named web of size
// bytes each (IDs art-000…).
func anonymous(t *testing.T, n, size int) *infrahubtest.Server {
	t.Helper()
	s := infrahubtest.New(infrahubtest.Options{AllowAnonymous: true})
	t.Cleanup(s.Close)
	for i := range n {
		s.Put("main", infrahubtest.Artifact{ID: fmt.Sprintf("art-%03d", i), Name: "web", Content: strings.Repeat("x", size)})
	}
	return s
}

func limitOf(t *testing.T, err error, want infrahub.Limit) *infrahub.LimitError {
	t.Helper()
	lim, ok := infrahub.AsLimitError(err)
	if !ok || lim.Limit != want {
		t.Fatalf("error %v, want a LimitError of the %s bound", err, want)
	}
	return lim
}

// A listing Infrahub counts over the bound is refused at its first page: the other pages
// are never asked for, and the error says how many artifacts there are.
func TestAListingOverTheArtifactsBoundStopsAtItsFirstPage(t *testing.T) {
	s := anonymous(t, 1000, 1)
	c := newClient(t, s, infrahub.Credentials{})
	q := infrahub.NewQuota(infrahub.Limits{MaxArtifacts: 250}, time.Now())
	arts, err := c.ListArtifacts(context.Background(), mainBranch, "web", q)
	lim := limitOf(t, err, infrahub.LimitArtifacts)
	if arts != nil || lim.Max != 250 || lim.Got != 1000 || !strings.Contains(err.Error(), "1000 artifacts, over the 250") {
		t.Errorf("listed %d artifacts, error %v", len(arts), err)
	}
	if got := s.GraphQLRequests(); got != 1 {
		t.Errorf("%d GraphQL requests for a listing over the bound, want 1 (its first page)", got)
	}
	if q.Exceeded() != lim {
		t.Errorf("the quota records %v, want the listing's bound", q.Exceeded())
	}

	// At the bound, the listing is whole.
	q = infrahub.NewQuota(infrahub.Limits{MaxArtifacts: 1000}, time.Now())
	if arts, err := c.ListArtifacts(context.Background(), mainBranch, "web", q); err != nil || len(arts) != 1000 {
		t.Errorf("a listing at the bound: %d artifacts, %v", len(arts), err)
	}
}

func TestAStoredQueryOverTheArtifactsBoundIsRefused(t *testing.T) {
	s := anonymous(t, 30, 1)
	q := infrahub.NewQuota(infrahub.Limits{MaxArtifacts: 20}, time.Now())
	_, err := newClient(t, s, infrahub.Credentials{}).ListArtifactsByQuery(context.Background(), mainBranch, "ArtifactIDs", "web", q)
	if lim := limitOf(t, err, infrahub.LimitArtifacts); lim.Got != 30 {
		t.Errorf("error %v, want 30 artifacts counted", err)
	}
}

// A sync downloads up to its bytes: the artifact that would go over is refused, and
// nothing more is downloaded, not even a small artifact, and without asking Infrahub.
func TestDownloadsStopAtTheSyncsBytes(t *testing.T) {
	s := anonymous(t, 4, 100<<10)
	s.Put("main", infrahubtest.Artifact{ID: "small", Name: "web", Content: "x"})
	c := newClient(t, s, infrahub.Credentials{})
	ctx := context.Background()
	q := infrahub.NewQuota(infrahub.Limits{MaxBytes: 250 << 10}, time.Now())
	defer q.Close()
	arts, err := c.ListArtifacts(ctx, mainBranch, "web", q)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range arts[:2] {
		if _, err := c.Download(ctx, mainBranch, a, q); err != nil {
			t.Fatalf("download %s within the bound: %v", a.ID, err)
		}
	}
	_, err = c.Download(ctx, mainBranch, arts[2], q)
	lim := limitOf(t, err, infrahub.LimitBytes)
	// The double declares no size: the bound is named, not the size it did not read.
	if lim.Max != 250<<10 || !strings.Contains(err.Error(), "artifact art-002 takes this sync's downloads past the 250.0 KiB one sync may download") {
		t.Errorf("error %v (got %d)", err, lim.Got)
	}
	before := s.TotalDownloads()
	_, err = c.Download(ctx, mainBranch, arts[4], q)
	_ = limitOf(t, err, infrahub.LimitBytes)
	if s.TotalDownloads() != before {
		t.Error("a sync over its bytes asked Infrahub for more")
	}
	if q.Downloaded() < 200<<10 || q.Downloaded() > 250<<10+1 {
		t.Errorf("the quota counts %d bytes downloaded", q.Downloaded())
	}
}

// One artifact the whole memory budget cannot hold is refused at once rather than waited
// for; the sync's other artifacts still download.
func TestAnArtifactLargerThanTheWholeBudgetIsRefusedNotWaitedFor(t *testing.T) {
	s := anonymous(t, 0, 0)
	s.Put("main", infrahubtest.Artifact{ID: "huge", Name: "web", Content: strings.Repeat("x", 200<<10)})
	s.Put("main", infrahubtest.Artifact{ID: "fits", Name: "web", Content: strings.Repeat("x", 100<<10)})
	c := newClient(t, s, infrahub.Credentials{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	budget := infrahub.NewBudget(1 << 20) // 128 KiB of content
	q := infrahub.NewQuota(infrahub.Limits{Budget: budget}, time.Now())
	defer q.Close()
	arts, err := c.ListArtifacts(ctx, mainBranch, "web", q)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Download(ctx, mainBranch, arts[1], q) // huge
	lim := limitOf(t, err, infrahub.LimitMemory)
	if lim.Max != 1<<20 || lim.Got <= 1<<20 || ctx.Err() != nil {
		t.Errorf("error %v, context %v", err, ctx.Err())
	}
	if data, err := c.Download(ctx, mainBranch, arts[0], q); err != nil || len(data) != 100<<10 {
		t.Errorf("an artifact that fits after one that did not: %d bytes, %v", len(data), err)
	}
	if q.Exceeded() != lim {
		t.Errorf("the quota records %v, want the memory bound", q.Exceeded())
	}
}

// The sync's deadline ends a listing or a download that takes too long, however long
// each request may take.
func TestTheSyncsDeadlineEndsItsFetch(t *testing.T) {
	s := anonymous(t, 1, 10)
	c := newClient(t, s, infrahub.Credentials{})
	ctx := context.Background()
	arts, err := c.ListArtifacts(ctx, mainBranch, "web", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path  string
		fetch func(*infrahub.Quota) error
	}{
		{"/graphql", func(q *infrahub.Quota) error { _, err := c.ListArtifacts(ctx, mainBranch, "web", q); return err }},
		{"/api/artifact/", func(q *infrahub.Quota) error { _, err := c.Download(ctx, mainBranch, arts[0], q); return err }},
	} {
		t.Run(tt.path, func(t *testing.T) {
			s.SetFault(infrahubtest.Fault{Path: tt.path, Delay: 2 * time.Second})
			q := infrahub.NewQuota(infrahub.Limits{Timeout: 300 * time.Millisecond}, time.Now())
			start := time.Now()
			err := tt.fetch(q)
			if lim := limitOf(t, err, infrahub.LimitTime); time.Duration(lim.Max) != 300*time.Millisecond || !strings.Contains(err.Error(), "300ms") {
				t.Errorf("error %v", err)
			}
			if took := time.Since(start); took > 900*time.Millisecond {
				t.Errorf("the fetch took %v, past its deadline", took)
			}
			s.SetFault(infrahubtest.Fault{})
		})
	}
}

// Without a quota nothing is bounded but what the client always refuses.
func TestANilQuotaBoundsNothing(t *testing.T) {
	s := anonymous(t, 3, 1<<20)
	c := newClient(t, s, infrahub.Credentials{})
	arts, err := c.ListArtifacts(context.Background(), mainBranch, "web", nil)
	if err != nil || len(arts) != 3 {
		t.Fatalf("%d artifacts, %v", len(arts), err)
	}
	for _, a := range arts {
		if data, err := c.Download(context.Background(), mainBranch, a, nil); err != nil || len(data) != 1<<20 {
			t.Errorf("%s: %d bytes, %v", a.ID, len(data), err)
		}
	}
}
