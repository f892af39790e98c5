package syncs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/runtime/events"
)

// The Events a change of a sync's readiness is worth, which Alerts send: its revision
// Ready everywhere it reaches, and a cluster where it starts failing.

// recordFailures records ClusterFailed for each cluster that fails now, and did not
// at the sync's last look, or failed for another reason; failures maps each cluster
// to why ("ApplyFailed: ..."). What this process saw last is kept per sync: after a
// restart, a cluster failing still is recorded once more.
func (r *Reconciler) recordFailures(obj Object, failures map[string]string) {
	counts := ""
	if c := obj.Clusters(); c != nil {
		counts = fmt.Sprintf("%d of %d", c.Ready, c.Total)
	}
	v, _ := r.failing.Load(obj.GetName())
	was, _ := v.(map[string]string)
	now := make(map[string]string, len(failures))
	for _, cluster := range slices.Sorted(maps.Keys(failures)) {
		why := failures[cluster]
		reason, _, _ := strings.Cut(why, ":")
		now[cluster] = reason
		if was[cluster] == reason {
			continue
		}
		metadata := map[string]string{"cluster": cluster}
		if counts != "" {
			metadata["clusters"] = counts
		}
		events.NewRecorder(r.Recorder, "Sync").RecordWith(obj, nil, corev1.EventTypeWarning, vidrav1alpha1.EventClusterFailed,
			fmt.Sprintf("%s failed on cluster %s: %s", obj.SyncKind().Kind+" "+obj.GetName(), cluster, why), metadata)
	}
	if len(now) == 0 {
		r.failing.Delete(obj.GetName())
		return
	}
	r.failing.Store(obj.GetName(), now)
}

// recordReady records RevisionReady when the sync became Ready on every cluster it
// reaches, or became so at another revision.
func (r *Reconciler) recordReady(before, obj Object) {
	clusters := obj.Clusters()
	if !obj.Waits() || clusters == nil || clusters.Total == 0 || !readyNow(obj) {
		return
	}
	revision := revisionOf(obj)
	if readyNow(before) && revisionOf(before) == revision {
		return
	}
	events.NewRecorder(r.Recorder, "Sync").RecordWith(obj, nil, corev1.EventTypeNormal, vidrav1alpha1.EventRevisionReady,
		fmt.Sprintf("revision %s Ready on %d of %d clusters", revision, clusters.Ready, clusters.Total),
		map[string]string{"revision": revision, "clusters": fmt.Sprintf("%d of %d", clusters.Ready, clusters.Total)})
}

func readyNow(obj Object) bool {
	c := meta.FindStatusCondition(*obj.StatusConditions(), vidrav1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue
}

// revisionOf names what a sync delivers now: its source's revision, else its rollout's
// revision, else its bundles' checksums.
func revisionOf(obj Object) string {
	if src := obj.Fetched(); src != nil && src.Revision != "" {
		return src.Revision
	}
	if st := obj.RolloutStatus(); st != nil && st.Revision > 0 {
		return fmt.Sprintf("%d", st.Revision)
	}
	var sums []string
	for _, b := range obj.Bundles() {
		sums = append(sums, b.Checksum)
	}
	sum := sha256.Sum256([]byte(strings.Join(sums, ",")))
	return "content " + hex.EncodeToString(sum[:6])
}
