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
	lastNoted := time.Now()
	err := testfleet.WaitFor(ctx, time.Second, timeout, "every bundle at its latest revision", func() (bool, error) {
		latest := f.sources.revisions()
		why := map[bundleOf]string{}
		ready, err := f.readyResources(ctx, why)
		if err != nil {
			f.history.record("waiting: the hub's VidraResources unreadable: %v", err)
			return false, nil
		}
		now := time.Now()
		for _, c := range f.clusters {
			revisions, err := memberRevisions(ctx, c.member.Client)
			for _, kind := range sourceKinds {
				b := bundleOf{kind, c.name}
				if _, ok := at[b]; ok {
					continue
				}
				switch {
				case err != nil:
					why[b] = fmt.Sprintf("%s unreadable: %v", c.member.Name, err)
				case !revisions.hold(kind, f.Objects, latest[kind]):
					why[b] = fmt.Sprintf("%s-0 at revision %q, want %d", kind, revisions[kind+"-0"], latest[kind])
				case ready[b]:
					at[b] = now
				}
			}
		}
		// What the bundles still wait for, every 10 s: where a slow convergence went.
		if len(at) < want && time.Since(lastNoted) >= 10*time.Second {
			lastNoted = time.Now()
			f.history.record("waiting for %d bundles: %s; the syncs: %s", want-len(at), waitingFor(at, why), f.syncStates(ctx))
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

// syncStates are, for each of the phase's syncs, the revision of its first bundle, its
// Ready condition and where its rollout stands: whether a bundle waits for its sync or
// for its VidraResource.
func (f *faultsRun) syncStates(ctx context.Context) string {
	var parts []string
	for _, k := range vidrav1alpha1.SyncKinds() {
		sync := k.New()
		name := faultsSyncName(k)
		if err := f.fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: name}, sync); err != nil {
			parts = append(parts, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		state := name + ":"
		if b := sync.Bundles(); len(b) > 0 {
			state += fmt.Sprintf(" bundle %s checksum %.8s", b[0].Revision, b[0].Checksum)
		}
		if c := apimeta.FindStatusCondition(*sync.StatusConditions(), "Ready"); c != nil {
			state += fmt.Sprintf(" Ready %s %s %.80s", c.Status, c.Reason, c.Message)
		}
		if r := sync.RolloutStatus(); r != nil {
			state += fmt.Sprintf(" rollout %d %s %s", r.Revision, r.Phase, r.Wave)
		}
		parts = append(parts, state)
	}
	return strings.Join(parts, "; ")
}

// waitingFor says why each bundle not converged is not, the first few.
func waitingFor(at map[bundleOf]time.Time, why map[bundleOf]string) string {
	var parts []string
	for b, reason := range why {
		if _, ok := at[b]; !ok {
			parts = append(parts, fmt.Sprintf("%s on %s (%s)", b.kind, b.cluster, reason))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts[:min(len(parts), 8)], "; ")
}

// readyResources are the bundles whose VidraResource is Ready for its generation; why
// gets, for the others, their Ready condition's reason and message.
func (f *faultsRun) readyResources(ctx context.Context, why map[bundleOf]string) (map[bundleOf]bool, error) {
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
			b := bundleOf{kind, vr.Spec.Destination.Cluster}
			c := apimeta.FindStatusCondition(vr.Status.Conditions, "Ready")
			switch {
			case c == nil:
				why[b] = "no Ready condition"
			case c.Status != "True" || vr.Status.ObservedGeneration != vr.Generation:
				why[b] = fmt.Sprintf("Ready %s %s for generation %d of %d: %.120s", c.Status, c.Reason, vr.Status.ObservedGeneration, vr.Generation, c.Message)
			default:
				ready[b] = true
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
// before it is pushed) to converged; of want bundles, those not in at count as bound.
func convergeFigures(last time.Time, at map[bundleOf]time.Time, want int, bound time.Duration) (p99, most float64) {
	var times []time.Duration
	for _, t := range at {
		times = append(times, max(t.Sub(last), 0))
	}
	for range want - len(at) {
		times = append(times, bound)
	}
	for _, d := range times {
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
