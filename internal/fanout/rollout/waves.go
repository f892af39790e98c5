package rollout

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// remainingWave names the implicit last wave: the clusters no wave selects.
const remainingWave = "remaining"

// wave is one wave's clusters, in name order.
type wave struct {
	Name       string
	pauseAfter time.Duration
	Clusters   []Cluster
}

// waves groups the clusters: each in the first wave whose selector matches, the rest in
// the implicit last wave. Waves without clusters are kept, so names stay stable.
func waves(spec vidrav1alpha1.RolloutSpec, clusters []Cluster) ([]wave, error) {
	out := make([]wave, 0, len(spec.Waves)+1)
	selectors := make([]labels.Selector, 0, len(spec.Waves))
	for _, w := range spec.Waves {
		sel, err := metav1.LabelSelectorAsSelector(w.ClusterSelector)
		if err != nil {
			return nil, fmt.Errorf("wave %s: clusterSelector: %w", w.Name, err)
		}
		selectors = append(selectors, sel)
		var pause time.Duration
		if w.PauseAfter != nil {
			pause = w.PauseAfter.Duration
		}
		out = append(out, wave{Name: w.Name, pauseAfter: pause})
	}
	out = append(out, wave{Name: remainingWave})
	for _, c := range clusters {
		i := slices.IndexFunc(selectors, func(s labels.Selector) bool { return s.Matches(labels.Set(c.Labels)) })
		if i < 0 {
			i = len(out) - 1
		}
		out[i].Clusters = append(out[i].Clusters, c)
	}
	for i := range out {
		slices.SortFunc(out[i].Clusters, func(a, b Cluster) int { return strings.Compare(a.Name, b.Name) })
	}
	return out, nil
}

// budget is how many clusters of a wave of size n may be updating or unhealthy at once.
func budget(spec vidrav1alpha1.RolloutSpec, n int) int {
	mu := intstr.FromInt32(1)
	if spec.MaxUnavailable != nil {
		mu = *spec.MaxUnavailable
	}
	v, err := intstr.GetScaledValueFromIntOrPercent(&mu, n, false)
	if err != nil || v < 1 {
		return 1
	}
	return v
}

// lacksRevision says whether a wave has a cluster the rollout still has to update.
func lacksRevision(w wave) bool {
	return slices.ContainsFunc(w.Clusters, func(c Cluster) bool { return !c.AtTarget && !c.Pinned })
}

func firstWave(all []wave) string {
	for _, w := range all {
		if len(w.Clusters) > 0 {
			return w.Name
		}
	}
	return all[0].Name
}

// laterClusters says whether a wave after i has clusters: only then is pauseAfter waited.
func laterClusters(all []wave, i int) bool {
	for _, w := range all[i+1:] {
		if len(w.Clusters) > 0 {
			return true
		}
	}
	return false
}

func lastWave(all []wave) string {
	for i := len(all) - 1; i >= 0; i-- {
		if len(all[i].Clusters) > 0 {
			return all[i].Name
		}
	}
	return all[len(all)-1].Name
}
