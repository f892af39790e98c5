package gitsource

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/vidra-operator/vidra/internal/runtime/bytesize"
)

func TestCheckoutOverLimitsIsRefusedAndRemoved(t *testing.T) {
	f := newFixture(t)
	files := map[string]string{}
	for i := range 20 {
		files[fmt.Sprintf("many/f%02d.yaml", i)] = strings.Repeat("x", 4096) + "\n"
	}
	tip := f.repo.Commit(t, "big", files, "big")
	rev := Revision{Ref: "big", Commit: tip}

	for _, tc := range []struct {
		limits Limits
		bound  string
		text   string
	}{
		{Limits{MaxFiles: 10}, "files", "over the 10 limit (--git-max-files)"},
		{Limits{MaxRepoBytes: 32 << 10}, "bytes", "over the 32 KiB limit (--git-max-repo-bytes)"},
	} {
		root := t.TempDir()
		c := newCacheIn(root, tc.limits)
		_, _, err := c.Checkout(context.Background(), f.remote, rev)
		var limit *LimitError
		if !errors.As(err, &limit) || limit.Bound != tc.bound {
			t.Fatalf("Checkout with %+v = %v, want a *LimitError on %s", tc.limits, err, tc.bound)
		}
		if !strings.Contains(err.Error(), tc.text) || !strings.Contains(err.Error(), "sha1:"+tip) {
			t.Errorf("error %q should name the commit and say %q", err, tc.text)
		}
		if entries, _ := os.ReadDir(root); len(entries) != 0 {
			t.Errorf("the refused checkout left %d entries behind", len(entries))
		}
	}

	c := newCache(t, Limits{MaxFiles: 1000, MaxRepoBytes: 10 << 20})
	_, release, err := c.Checkout(context.Background(), f.remote, rev)
	if err != nil {
		t.Fatalf("Checkout within the limits: %v", err)
	}
	release()
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{
		512:                   "512 B",
		10 << 20:              "10 MiB",
		12*(1<<20) + 300*1024: "12.3 MiB",
		3 << 30:               "3 GiB",
	} {
		if got := bytesize.Format(n); got != want {
			t.Errorf("bytesize.Format(%d) = %q, want %q", n, got, want)
		}
	}
}
