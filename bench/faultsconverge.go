package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// syncLabels name each source kind's sync on its VidraResources.
var syncLabels = map[string]string{
	"infrahub": vidrav1alpha1.InfrahubSyncLabel, "git": vidrav1alpha1.GitSyncLabel,
	"oci": vidrav1alpha1.OCISyncLabel, "helm": vidrav1alpha1.HelmSyncLabel,
}

// bundleOf is one sync's bundle on one cluster.
type bundleOf struct{ kind, cluster string }

// converged waits until every sync's bundle is at its source's latest revision on every
// cluster: each of its objects on the member says so, and its VidraResource on the hub is
// Ready for its generation. It returns when each bundle was first seen so, and an error
// naming those that were not within timeout.
func (f *faultsRun) converged(ctx context.Context, timeout time.Duration) (map[bundleOf]time.Time, error) {
	at := map[bundleOf]time.Time{}
	want := len(f.clusters) * len(sourceKinds)
	err := testfleet.WaitFor(ctx, time.Second, timeout, "every bundle at its latest revision", func() (bool, error) {
		latest := f.sources.revisions()
		ready, err := f.readyResources(ctx)
		if err != nil {
			return false, nil //nolint:nilerr // the hub may be starting again: look again
		}
		now := time.Now()
		for _, c := range f.clusters {
			revisions, err := memberRevisions(ctx, c.member.Client)
			if err != nil {
				continue
			}
			for _, kind := range sourceKinds {
				b := bundleOf{kind, c.name}
				if _, ok := at[b]; ok {
					continue
				}
				if ready[b] && revisions.hold(kind, f.Objects, latest[kind]) {
					at[b] = now
				}
			}
		}
		return len(at) == want, nil
	})
	if err != nil {
		var missing []string
		for _, c := range f.clusters {
			for _, kind := range sourceKinds {
				if _, ok := at[bundleOf{kind, c.name}]; !ok {
					missing = append(missing, kind+" on "+c.name)
				}
			}
		}
		return at, fmt.Errorf("%d of %d bundles not at their latest revision (%s): %w", len(missing), want, strings.Join(missing, ", "), err)
	}
	return at, nil
}

// readyResources are the bundles whose VidraResource is Ready for its generation.
func (f *faultsRun) readyResources(ctx context.Context) (map[bundleOf]bool, error) {
	var vrs vidrav1alpha1.VidraResourceList
	if err := f.fleet.Hub.Client.List(ctx, &vrs); err != nil {
		return nil, err
	}
	ready := map[bundleOf]bool{}
	for _, vr := range vrs.Items {
		for kind, label := range syncLabels {
			if vr.Labels[label] != faultsSyncPrefix+kind {
				continue
			}
			c := apimeta.FindStatusCondition(vr.Status.Conditions, "Ready")
			if c != nil && c.Status == "True" && vr.Status.ObservedGeneration == vr.Generation {
				ready[bundleOf{kind, vr.Spec.Destination.Cluster}] = true
			}
		}
	}
	return ready, nil
}

// objectRevisions are the revisions the delivered ConfigMaps of one member hold, by name.
type objectRevisions map[string]string

func memberRevisions(ctx context.Context, member client.Client) (objectRevisions, error) {
	var cms corev1.ConfigMapList
	if err := member.List(ctx, &cms, client.InNamespace(faultsNamespace)); err != nil {
		return nil, err
	}
	out := objectRevisions{}
	for _, cm := range cms.Items {
		out[cm.Name] = cm.Data["revision"]
	}
	return out, nil
}

// hold says whether every object of kind's bundle holds revision k, and the shared
// object is there.
func (r objectRevisions) hold(kind string, objects, k int) bool {
	for i := range objects {
		if r[fmt.Sprintf("%s-%d", kind, i)] != strconv.Itoa(k) {
			return false
		}
	}
	_, shared := r[faultsSharedName]
	return shared || !slices.Contains(sharingKinds, kind)
}

// convergeFigures are the p99 and the most of the bundles' times from last (the last
// fault undone or revision pushed, whichever came later: a revision cannot be delivered
// before it is pushed) to converged.
func convergeFigures(last time.Time, at map[bundleOf]time.Time) (p99, most float64) {
	var times []time.Duration
	for _, t := range at {
		d := max(t.Sub(last), 0)
		times = append(times, d)
		most = max(most, d.Seconds())
	}
	return percentile(times, 99) / 1000, most
}

// credentialsInLogs counts, in every log of the run's directory, the lines holding one of
// the sources' credentials.
func (f *faultsRun) credentialsInLogs() error {
	logs, err := filepath.Glob(filepath.Join(f.dir, "*.log"))
	if err != nil {
		return err
	}
	for _, path := range logs {
		data, err := os.ReadFile(path) //nolint:gosec // the run's own logs
		if err != nil {
			return err
		}
		for _, secret := range f.sources.credentials() {
			if n := strings.Count(string(data), secret); n > 0 {
				f.found.found(credentialInLog, "%s holds a source's credential %d times", path, n)
			}
		}
	}
	return nil
}
