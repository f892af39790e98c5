package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// previewBranch is the branch the demo pushes and previews before it merges.
const previewBranch = "preview/debug-logs"

// previewBranch pushes a branch that turns the fleet's logs to debug, asks the GitSync
// to look (as a push webhook would), waits for its preview, and prints it as a reviewer
// would read it: kubectl vidra preview. Nothing is applied: member-1 is dry-run, and
// member-2, which pulls, is listed as not previewed.
func (s *sandbox) previewBranch(ctx context.Context, _ logr.Logger) error {
	commit := s.gitRepo.Commit(s.gitHost, previewBranch, map[string]string{"fleet/settings.yaml": gitSettings("debug")["fleet/settings.yaml"]}, "debug logs")
	if s.gitHost.err != nil {
		return s.gitHost.err
	}
	fmt.Fprintf(os.Stdout, "    pushed %s at %s\n", previewBranch, commit[:12])
	if _, err := s.kubectl(ctx, nil, "annotate", "gitsync", gitSyncName, "--overwrite",
		vidrav1alpha1.RequestedAtAnnotation+"="+time.Now().Format(time.RFC3339Nano)); err != nil {
		return err
	}
	want := "refs/heads/" + previewBranch + "@sha1:" + commit
	err := s.waitFor(ctx, 90*time.Second, "the preview of "+previewBranch, func() (bool, error) {
		out, err := s.kubectl(ctx, nil, "get", "gitsync", gitSyncName, "-o", "jsonpath={.status.previews}")
		if err != nil || out == "" {
			return false, err
		}
		var previews []vidrav1alpha1.RefPreview
		if err := json.Unmarshal([]byte(out), &previews); err != nil {
			return false, err
		}
		for _, p := range previews {
			if p.Revision == want && p.Digest != "" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	// kubectl vidra preview exits 1 when something would change, as kubectl diff does.
	out, err := s.plugin(ctx, "preview", "gitsync/"+gitSyncName, "--ref", previewBranch)
	if err != nil && !strings.Contains(out, "1 of 1 clusters change") {
		return err
	}
	fmt.Fprintf(os.Stdout, "\n==> kubectl vidra preview gitsync/%s --ref %s\n%s", gitSyncName, previewBranch, out)
	if v, _ := s.kubectl(ctx, nil, "--context", s.fleet.Members[0].Name, "get", "configmap", "fleet-settings", "-n", gitNamespace,
		"-o", "jsonpath={.data.logLevel}"); v != "info" {
		return fmt.Errorf("the preview changed fleet-settings on %s: logLevel %q", s.fleet.Members[0].Name, v)
	}
	return nil
}
