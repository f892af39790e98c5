package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
)

// uninstallPoll is how often the steps look whether the operator has done its part.
const uninstallPoll = 250 * time.Millisecond

// releaseBundles suspends every sync, so that none writes a VidraResource again; tells
// every VidraResource to release (or prune) and deletes it, which the operator carries
// out; then deletes the syncs, which have nothing left.
func (o *uninstallOptions) releaseBundles(ctx context.Context, hub hubAccess, r *uninstallReport) error {
	syncs, err := listSyncs(ctx, hub.client)
	if err != nil {
		return err
	}
	if err := o.suspendSyncs(ctx, hub.client, syncs, r); err != nil {
		return err
	}
	var vrs vidrav1alpha1.VidraResourceList
	if err := hub.client.List(ctx, &vrs); err != nil && !meta.IsNoMatchError(err) {
		return hubError(err, "list VidraResources")
	}
	if err := o.setPrune(ctx, hub.client, vrs.Items); err != nil {
		return err
	}
	if err := o.deleteResources(ctx, hub.client, vrs.Items, r); err != nil {
		return err
	}
	if err := o.deleteContent(ctx, hub.client, r); err != nil {
		return err
	}
	for _, s := range syncs {
		if err := client.IgnoreNotFound(hub.client.Delete(ctx, s)); err != nil {
			return fmt.Errorf("delete %s: %w", s.SyncKind().Ref(s.GetName()), err)
		}
		r.done("%s deleted", syncRef(s))
	}
	return nil
}

func syncRef(s vidrav1alpha1.Sync) string {
	return strings.ToLower(s.SyncKind().Kind) + "/" + s.GetName()
}

// listSyncs lists the syncs of every kind; a kind whose CRD is gone has none.
func listSyncs(ctx context.Context, hub client.Client) ([]vidrav1alpha1.Sync, error) {
	var syncs []vidrav1alpha1.Sync
	for _, kind := range vidrav1alpha1.SyncKinds() {
		list := kind.NewList()
		if err := hub.List(ctx, list); err != nil {
			if meta.IsNoMatchError(err) {
				continue
			}
			return nil, hubError(err, "list "+kind.Resource)
		}
		syncs = append(syncs, list.Syncs()...)
	}
	return syncs, nil
}

// suspendSyncs suspends every sync and waits until the operator says so on each: a
// reconcile that saw the suspension is the last that could write a VidraResource.
func (o *uninstallOptions) suspendSyncs(ctx context.Context, hub client.Client, syncs []vidrav1alpha1.Sync, r *uninstallReport) error {
	suspend := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":true}}`))
	for _, s := range syncs {
		if s.Suspended() {
			continue
		}
		if err := hub.Patch(ctx, s, suspend); err != nil {
			return fmt.Errorf("suspend %s: %w", syncRef(s), err)
		}
		r.done("%s suspended", syncRef(s))
	}
	for _, s := range syncs {
		err := o.poll(ctx, func(ctx context.Context) (bool, error) {
			if err := hub.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
				return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
			}
			ready := meta.FindStatusCondition(*s.StatusConditions(), vidrav1alpha1.ConditionReady)
			return ready != nil && ready.Reason == vidrav1alpha1.ReasonSuspended && ready.ObservedGeneration >= s.GetGeneration(), nil
		})
		if err != nil {
			return fmt.Errorf("%s: the operator has not confirmed its suspension (is it running?): %w", syncRef(s), err)
		}
	}
	return nil
}

// setPrune tells every VidraResource to release what it delivered when deleted (or,
// with --prune-workloads, to delete it), and waits until each pull cluster's agent has
// the change: its copy, not the hub's VidraResource, is what releases there.
func (o *uninstallOptions) setPrune(ctx context.Context, hub client.Client, vrs []vidrav1alpha1.VidraResource) error {
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"prune":%t}}`, o.pruneWorkloads))
	pullClusters := map[string]bool{}
	for i := range vrs {
		vr := &vrs[i]
		if vr.Spec.Prune != nil && *vr.Spec.Prune == o.pruneWorkloads {
			continue
		}
		if err := hub.Patch(ctx, vr, patch); err != nil {
			return client.IgnoreNotFound(fmt.Errorf("set prune on vidraresource %s: %w", vr.Name, err))
		}
		if _, seen := pullClusters[vr.Status.Cluster]; !seen {
			pullClusters[vr.Status.Cluster] = isPullCluster(ctx, hub, vr.Status.Cluster)
		}
		if !pullClusters[vr.Status.Cluster] {
			continue
		}
		err := o.poll(ctx, func(ctx context.Context) (bool, error) {
			if err := hub.Get(ctx, client.ObjectKeyFromObject(vr), vr); err != nil {
				return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
			}
			return vr.Status.ObservedGeneration >= vr.Generation, nil
		})
		if err != nil {
			return fmt.Errorf("vidraresource %s: the agent of pull cluster %s has not taken prune: %t (deleting it now could do otherwise): bring the agent back, or unenroll the cluster with kubectl vidra unenroll %s --hub-only, and run uninstall again: %w",
				vr.Name, vr.Status.Cluster, o.pruneWorkloads, vr.Status.Cluster, err)
		}
	}
	return nil
}

func isPullCluster(ctx context.Context, hub client.Client, name string) bool {
	vc := &vidrav1alpha1.VidraCluster{}
	return name != "" && hub.Get(ctx, client.ObjectKey{Name: name}, vc) == nil && vc.Status.Mode == vidrav1alpha1.ClusterModePull
}

// deleteResources deletes every VidraResource and waits while the operator releases or
// prunes its objects; what was released is reported as left, per cluster.
func (o *uninstallOptions) deleteResources(ctx context.Context, hub client.Client, vrs []vidrav1alpha1.VidraResource, r *uninstallReport) error {
	delivered := map[string]map[string]bool{} // cluster → object keys
	for i := range vrs {
		vr := &vrs[i]
		if err := client.IgnoreNotFound(hub.Delete(ctx, vr)); err != nil {
			return fmt.Errorf("delete vidraresource %s: %w", vr.Name, err)
		}
		refs := inventory.FromEntries(vr.Status.ManagedResources)
		r.done("vidraresource/%s deleted (%s on %s %s)", vr.Name, objects(len(refs)), clusterOrHub(vr.Status.Cluster), o.releaseVerb())
		if delivered[vr.Status.Cluster] == nil {
			delivered[vr.Status.Cluster] = map[string]bool{}
		}
		for _, ref := range refs {
			delivered[vr.Status.Cluster][ref.Key()] = true
		}
	}
	var remaining vidrav1alpha1.VidraResourceList
	err := o.poll(ctx, func(ctx context.Context) (bool, error) {
		err := hub.List(ctx, &remaining)
		return err == nil && len(remaining.Items) == 0 || meta.IsNoMatchError(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		return fmt.Errorf("VidraResources not gone yet (is the operator running?): %s: %w", stillDeleting(remaining.Items), err)
	}
	if !o.pruneWorkloads {
		for _, cluster := range slices.Sorted(maps.Keys(delivered)) {
			r.leave("%s on %s, released: no longer Vidra's", objects(len(delivered[cluster])), clusterOrHub(cluster))
		}
	}
	return nil
}

func (o *uninstallOptions) releaseVerb() string {
	if o.pruneWorkloads {
		return "to prune"
	}
	return "to release"
}

func objects(n int) string {
	if n == 1 {
		return "1 object"
	}
	return fmt.Sprintf("%d objects", n)
}

func clusterOrHub(cluster string) string {
	if cluster == "" {
		return "the hub"
	}
	return cluster
}

// stillDeleting names each VidraResource left and why its Ready condition says it is.
func stillDeleting(vrs []vidrav1alpha1.VidraResource) string {
	lines := make([]string, 0, len(vrs))
	for _, vr := range vrs {
		why := "not looked at"
		if c := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionReady); c != nil {
			why = c.Message
		}
		lines = append(lines, fmt.Sprintf("vidraresource/%s (%s): %s", vr.Name, clusterOrHub(vr.Status.Cluster), why))
	}
	return strings.Join(lines, "; ")
}

// poll waits for done, at most --timeout.
func (o *uninstallOptions) poll(ctx context.Context, done wait.ConditionWithContextFunc) error {
	err := wait.PollUntilContextTimeout(ctx, uninstallPoll, o.timeout, true, done)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("waited %s", o.timeout)
	}
	return err
}

// deleteContent deletes the content store's chunks: no VidraResource names them now.
func (o *uninstallOptions) deleteContent(ctx context.Context, hub client.Client, r *uninstallReport) error {
	var chunks corev1.SecretList
	if err := hub.List(ctx, &chunks, client.InNamespace(o.operatorNamespace), client.HasLabels{content.ChunkLabel}); err != nil {
		return fmt.Errorf("list the content store's Secrets in namespace %s: %w", o.operatorNamespace, err)
	}
	for i := range chunks.Items {
		if err := client.IgnoreNotFound(hub.Delete(ctx, &chunks.Items[i])); err != nil {
			return fmt.Errorf("delete the content store's secret %s/%s: %w", o.operatorNamespace, chunks.Items[i].Name, err)
		}
	}
	if n := len(chunks.Items); n > 0 {
		r.done("%d secrets of the content store deleted (in namespace %s)", n, o.operatorNamespace)
	}
	return nil
}
