package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// previewsResult is what a GitSync's previews cost at one fleet size: the time from a
// push of a preview branch (and the sync asked for, as a push webhook does) to the
// preview of its commit on every cluster, in the sync's status; and how another sync's
// delivery to the same clusters fares meanwhile against quiet.
type previewsResult struct {
	Clusters         int       `json:"clusters"`
	Rounds           int       `json:"rounds"`
	ObjectsPerBundle int       `json:"objectsPerBundle"`
	PushToPreviewP50 float64   `json:"pushToPreviewSecondsP50"`
	PushToPreviewMax float64   `json:"pushToPreviewSecondsMax"`
	PushToPreview    []float64 `json:"pushToPreviewSeconds"`
	// DeliveryQuiet and DeliveryDuringPreviews are the other sync's request-to-Ready,
	// median over the rounds, alone and while a preview runs; Ratio is their quotient.
	DeliveryQuietSeconds    float64 `json:"deliveryQuietSecondsP50"`
	DeliveryPreviewsSeconds float64 `json:"deliveryDuringPreviewsSecondsP50"`
	DeliveryRatio           float64 `json:"deliveryRatio"`
}

// The previews phase's second sync: the same clusters, another path of the repository.
const (
	previewsOtherSync = "bench-previews-other"
	previewsOtherPath = "other"
	previewsRefs      = "refs/heads/preview/*"
)

// measurePreviews measures each size of -previews-clusters on clusters set up as the
// variables phase's, and removed after each.
func (b *bench) measurePreviews(ctx context.Context, r *results) error {
	for _, n := range b.PreviewsClusters {
		res, err := b.measurePreviewsAt(ctx, n)
		if err != nil {
			return fmt.Errorf("%d clusters: %w", n, err)
		}
		r.Previews = append(r.Previews, res)
	}
	return nil
}

func (b *bench) measurePreviewsAt(ctx context.Context, n int) (res previewsResult, err error) {
	sized := *b
	sized.VariablesClusters, sized.VariablesSets = n, min(b.VariablesSets, n)
	v := &variablesRun{bench: &sized, previews: true}
	defer func() { err = errors.Join(err, v.removeOther(ctx), v.clean(ctx)) }()
	if err := v.setUp(ctx); err != nil {
		return res, err
	}
	if err := v.setUpOther(ctx); err != nil {
		return res, err
	}
	res = previewsResult{Clusters: n, Rounds: b.PreviewsRounds, ObjectsPerBundle: b.Objects}
	var quiet, busy, toPreview []time.Duration
	for k := 1; k <= b.PreviewsRounds; k++ {
		d, err := v.deliverOther(ctx, 2*k)
		if err != nil {
			return res, err
		}
		quiet = append(quiet, d)
		// A preview alone, timed from its push.
		pushed := time.Now()
		commit, err := v.pushPreview(ctx, 2*k)
		if err != nil {
			return res, err
		}
		if err := v.waitPreview(ctx, 2*k, commit); err != nil {
			return res, err
		}
		took := time.Since(pushed)
		toPreview = append(toPreview, took)
		res.PushToPreview = append(res.PushToPreview, took.Seconds())
		// Another preview, and the other sync's delivery beside it.
		if commit, err = v.pushPreview(ctx, 2*k+1); err != nil {
			return res, err
		}
		if d, err = v.deliverOther(ctx, 2*k+1); err != nil {
			return res, err
		}
		busy = append(busy, d)
		if err := v.waitPreview(ctx, 2*k+1, commit); err != nil {
			return res, err
		}
		fmt.Fprintf(v.log, "    round %d: preview on %d clusters in %s; the other sync Ready in %s quiet, %s beside a preview\n",
			k, n, took.Round(time.Millisecond), quiet[len(quiet)-1].Round(time.Millisecond), d.Round(time.Millisecond))
	}
	res.PushToPreviewP50, res.PushToPreviewMax = percentile(toPreview, 50)/1000, percentile(toPreview, 100)/1000
	res.DeliveryQuietSeconds, res.DeliveryPreviewsSeconds = percentile(quiet, 50)/1000, percentile(busy, 50)/1000
	res.DeliveryRatio = res.DeliveryPreviewsSeconds / res.DeliveryQuietSeconds
	return res, nil
}

// pushPreview commits round k's change on branch preview/k and asks for a sync of the
// previewing GitSync, as a push webhook does.
func (v *variablesRun) pushPreview(ctx context.Context, k int) (string, error) {
	var commit string
	err := v.git.try(func() {
		commit = v.repo.Commit(v.git, fmt.Sprintf("preview/%d", k), map[string]string{"deploy/settings.yaml": variablesBundle(v.Objects, 1000+k)}, "preview")
	})
	if err != nil {
		return "", fmt.Errorf("push preview %d: %w", k, err)
	}
	return commit, v.requestSyncOf(ctx, variablesSyncName)
}

// waitPreview waits until the GitSync's status previews branch preview/k at commit on
// every cluster.
func (v *variablesRun) waitPreview(ctx context.Context, k int, commit string) error {
	ref := fmt.Sprintf("refs/heads/preview/%d", k)
	gs := &vidrav1alpha1.GitSync{}
	return testfleet.WaitFor(ctx, pollEvery, 5*time.Minute, "the preview of "+ref, func() (bool, error) {
		if err := v.fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: variablesSyncName}, gs); err != nil {
			return false, err
		}
		for _, p := range gs.Status.Previews {
			if p.Ref == ref && p.Revision == ref+"@sha1:"+commit {
				if int(p.Clusters) != len(v.clusters) {
					return false, fmt.Errorf("preview of %s on %d clusters, want %d: %s", ref, p.Clusters, len(v.clusters), p.Message)
				}
				return true, nil
			}
		}
		return false, nil
	})
}

// setUpOther delivers the second sync, and waits until it is Ready.
func (v *variablesRun) setUpOther(ctx context.Context) error {
	commit, err := v.commitOther(0)
	if err != nil {
		return err
	}
	gs := v.gitSync()
	gs.Name, gs.Spec.Source.Path, gs.Spec.Previews = previewsOtherSync, previewsOtherPath, nil
	if err := v.fleet.Hub.Client.Create(ctx, gs); err != nil {
		return fmt.Errorf("create GitSync %s: %w", previewsOtherSync, err)
	}
	return v.waitReadyOf(ctx, previewsOtherSync, commit)
}

// deliverOther commits revision k of the second sync's path and times it from its
// sync's request to Ready on every cluster.
func (v *variablesRun) deliverOther(ctx context.Context, k int) (time.Duration, error) {
	commit, err := v.commitOther(k)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := v.requestSyncOf(ctx, previewsOtherSync); err != nil {
		return 0, err
	}
	err = v.waitReadyOf(ctx, previewsOtherSync, commit)
	return time.Since(start), err
}

func (v *variablesRun) commitOther(k int) (string, error) {
	var commit string
	err := v.git.try(func() {
		commit = v.repo.Commit(v.git, variablesBranch, map[string]string{previewsOtherPath + "/other.yaml": variablesBundle(v.Objects, k)}, "other")
	})
	return commit, err
}

// removeOther deletes the second sync and its VidraResources.
func (v *variablesRun) removeOther(ctx context.Context) error {
	return v.removeSyncNamed(ctx, previewsOtherSync)
}

// targets are the previews phase's: the preview of a push within 10 s at 100 clusters,
// and another sync's delivery within 1.2 times its quiet time meanwhile.
func previewsTargets(all []previewsResult) []check {
	var out []check
	for _, p := range all {
		out = append(out,
			check{fmt.Sprintf("previews at %d clusters: push to preview, max (s)", p.Clusters), p.PushToPreviewMax, "< 10", p.PushToPreviewMax < 10},
			check{fmt.Sprintf("previews at %d clusters: another sync's delivery / quiet", p.Clusters), p.DeliveryRatio, "<= 1.2", p.DeliveryRatio <= 1.2})
	}
	return out
}

func (p previewsResult) print() string {
	return fmt.Sprintf("push to preview on every cluster p50 %.2f s, max %.2f s (%s s); another sync's delivery p50 %.2f s quiet, %.2f s beside previews (%.2fx)",
		p.PushToPreviewP50, p.PushToPreviewMax, joined(p.PushToPreview, "%.2f"), p.DeliveryQuietSeconds, p.DeliveryPreviewsSeconds, p.DeliveryRatio)
}
