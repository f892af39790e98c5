package helmsource_test

import (
	"bytes"
	"testing"

	"github.com/vidra-operator/vidra/internal/test/helmrepo"
)

// Kubernetes deletes a Job with ttlSecondsAfterFinished once it finishes; delivered as
// desired state, it would be re-created as drift and run again and again.
func TestHookJobsLoseTheirTTL(t *testing.T) {
	job := "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: m\n  annotations:\n    helm.sh/hook: pre-install\n" +
		"spec:\n  ttlSecondsAfterFinished: 100\n  backoffLimit: 0\n"
	ch := helmrepo.ChartWith(t, helmrepo.HooksChart, "1.0.0", map[string]string{"templates/migrate-job.yaml": job})
	r := render(t, ch, opts())
	if bytes.Contains(r.Manifest, []byte("ttlSecondsAfterFinished")) {
		t.Fatalf("a hook Job kept its TTL:\n%s", r.Manifest)
	}
	if !bytes.Contains(r.Manifest, []byte("backoffLimit: 0")) {
		t.Fatalf("the rest of the Job's spec is gone:\n%s", r.Manifest)
	}
	if !bytes.Equal(render(t, ch, opts()).Manifest, r.Manifest) {
		t.Fatal("two renderings of equal inputs differ")
	}
}
