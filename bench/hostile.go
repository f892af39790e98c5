package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/hostile"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
)

// chartMemoryLimitMiB is the operator's memory limit in the chart
// (resources.limits.memory).
const chartMemoryLimitMiB = 1024

// hostileResult is what one team's sync costs while another team's syncs read sources
// that never stop answering, beside the same sync on a quiet hub (target: within 2x of
// quiet), and the operator's peak RSS meanwhile (target: under half the chart's limit).
type hostileResult struct {
	// QuietMs is the longest time, over the rounds, from creating an InfrahubSync of one
	// artifact to Ready; HostileMs the same from the moment the hostile syncs are created.
	QuietMs   float64 `json:"quietMs"`
	HostileMs float64 `json:"hostileMs"`
	// Syncs are the hostile syncs, as kind/name: reason.
	Syncs []string `json:"syncs"`
	// PeakRSSMiB is the operator's peak RSS from the hostile syncs' creation until every
	// one of them was stopped at its bound (the render processes apart: each is bounded by
	// --helm-render-max-memory).
	PeakRSSMiB    float64 `json:"peakRSSMiB"`
	ChartLimitMiB float64 `json:"chartLimitMiB"`
	// SentMiB is what the hostile servers sent before the operator stopped reading.
	SentMiB float64 `json:"sentMiB"`
}

// measureHostile times one team's InfrahubSync quiet, then while another team's syncs
// read a Git server whose ref advertisement never ends, one whose refusal never ends, a
// registry whose tag list never ends, and a chart that asks for 1.5 GB.
func (b *bench) measureHostile(ctx context.Context, r *results) error {
	dest := vidrav1alpha1.InfrahubSyncDestination{Destination: vidrav1alpha1.Destination{Cluster: b.members[0].Name, Namespace: "team-a"}}
	own := infrahubtest.New(infrahubtest.Options{AllowAnonymous: true})
	defer own.Close()
	own.Put("main", infrahubtest.Artifact{ID: "team-a", Name: "team-a", TargetLabel: "t", DefinitionName: "d", Content: bundle("team-a-sync", b.Objects)})
	hr := &hostileResult{ChartLimitMiB: chartMemoryLimitMiB}
	var err error
	if hr.QuietMs, err = b.timeSync(ctx, "hostile-quiet", own.URL(), dest); err != nil {
		return err
	}
	sources, err := hostile.Start()
	if err != nil {
		return err
	}
	defer sources.Close()
	syncs, err := hostileSyncs(sources.Syncs, b.members[0].Name)
	if err != nil {
		return err
	}
	defer func() {
		for _, s := range syncs {
			_ = b.fleet.Hub.Client.Delete(ctx, s)
		}
	}()
	if err := b.resetPeakRSS(); err != nil {
		return err
	}
	for _, s := range syncs {
		if err := b.fleet.Hub.Client.Create(ctx, s); err != nil {
			return fmt.Errorf("create %s %s: %w", s.GetKind(), s.GetName(), err)
		}
	}
	// What the operator and the control planes spend while the hostile syncs run.
	b.startProfiles(ctx, "hostile")
	if hr.HostileMs, err = b.timeSync(ctx, "hostile", own.URL(), dest); err != nil {
		return err
	}
	b.waitProfiles()
	if hr.Syncs, err = b.waitStopped(ctx, sources.Syncs, syncs); err != nil {
		return err
	}
	m, err := b.memory(ctx)
	if err != nil {
		return err
	}
	hr.PeakRSSMiB = m.peakRSSMiB
	hr.SentMiB = float64(sources.Sent()) / (1 << 20)
	r.Hostile = hr
	return nil
}

// hostileSyncs are the hostile team's syncs, to cluster, as objects to create.
func hostileSyncs(syncs []hostile.Sync, cluster string) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(syncs))
	for _, s := range syncs {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(s.Manifest(cluster), &obj.Object); err != nil {
			return nil, fmt.Errorf("%s %s: %w", s.Kind, s.Name, err)
		}
		out = append(out, obj)
	}
	return out, nil
}

// waitStopped waits until every sync's Ready condition is False with the reason its bound
// gives, and returns each as kind/name: reason.
func (b *bench) waitStopped(ctx context.Context, want []hostile.Sync, syncs []*unstructured.Unstructured) ([]string, error) {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var got []string
		for i, s := range syncs {
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(s.GroupVersionKind())
			if err := b.fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(s), obj); err != nil {
				return nil, err
			}
			if reason := readyReason(obj); reason == want[i].Reason {
				got = append(got, s.GetKind()+"/"+s.GetName()+": "+reason)
			}
		}
		if len(got) == len(syncs) {
			return got, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("after 5m only %d of %d hostile syncs stopped at their bound: %v", len(got), len(syncs), got)
		}
		time.Sleep(time.Second)
	}
}

// readyReason is the reason of obj's Ready condition.
func readyReason(obj *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == vidrav1alpha1.ConditionReady {
			reason, _ := m["reason"].(string)
			return reason
		}
	}
	return ""
}

// resetPeakRSS sets the operator's peak RSS (VmHWM) back to its RSS now (Linux's
// clear_refs, 5).
func (b *bench) resetPeakRSS() error {
	path := fmt.Sprintf("/proc/%d/clear_refs", b.operator.Process.Pid)
	if err := os.WriteFile(path, []byte("5"), 0o600); err != nil {
		return fmt.Errorf("reset the operator's peak RSS: %w", err)
	}
	return nil
}

func (hr *hostileResult) print() string {
	return fmt.Sprintf("quiet %.0f ms, beside hostile syncs %.0f ms (%.2fx); operator peak RSS %.0f MiB meanwhile (chart limit %.0f MiB); the hostile servers sent %.1f MiB; %s",
		hr.QuietMs, hr.HostileMs, hr.HostileMs/hr.QuietMs, hr.PeakRSSMiB, hr.ChartLimitMiB, hr.SentMiB, strings.Join(hr.Syncs, ", "))
}
