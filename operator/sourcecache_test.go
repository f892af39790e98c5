package operator_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
	"github.com/vidra-operator/vidra/operator"
)

// An operator given no --source-cache-dir keeps its checkouts and artifacts in a
// temporary directory of its own, and removes it when it stops; one given a directory
// leaves it. Before, every run left its temporary directory behind: hundreds a day on a
// machine that runs the tests.
func TestATemporarySourceCacheGoesWithTheOperator(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fleet, err := testfleet.Start(ctx, testfleet.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fleet.Stop(); err != nil {
			t.Error(err)
		}
	})
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	given := filepath.Join(t.TempDir(), "sources")
	if err := os.Mkdir(given, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, cacheDir := range []string{"", given} {
		opCtx, stop := context.WithCancel(ctx)
		op, err := testoperator.Start(opCtx, fleet, testoperator.Options{Configure: func(o *operator.Options) { o.SourceCacheDir = cacheDir }})
		if err != nil {
			stop()
			t.Fatal(err)
		}
		made, err := filepath.Glob(filepath.Join(tmp, "vidra-sources-*"))
		if err != nil {
			t.Fatal(err)
		}
		if cacheDir == "" && len(made) != 1 {
			t.Errorf("temporary source caches while the operator runs: %v, want one", made)
		}
		stop()
		<-op.Stopped
		if left, _ := filepath.Glob(filepath.Join(tmp, "vidra-sources-*")); len(left) != 0 {
			t.Fatalf("with --source-cache-dir %q, left behind once the operator stopped: %v", cacheDir, left)
		}
	}
	if _, err := os.Stat(given); err != nil {
		t.Errorf("the source cache given was removed: %v", err)
	}
}
