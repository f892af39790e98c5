package vidraresource

import (
	"context"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/destination"
	"github.com/vidra-operator/vidra/internal/fleet/policy"
)

// guardRefusal says why the VidraResource may not be delivered for want of the hub's
// admission policies (empty when it may). Every VidraResource a person wrote relies on
// them: its destination was checked at admission, and its stamp (which says who asked,
// whose rights the operator checks for a server URL and stored content) is guarded by
// them, and without them anyone may rewrite it by an update that keeps the spec. One a
// sync made relies on them too: only the deliver policy keeps anyone but the operator
// from naming a sync as a VidraResource's controller, so while a policy is missing no
// VidraResource is delivered (its objects stay as they are); once all are in force, one
// naming a server URL must say who asked. One that names a sync and says who asked was
// written by that person, not the operator, and is theirs to answer for.
func (r *Reconciler) guardRefusal(ctx context.Context, vr *vidrav1alpha1.VidraResource, dest *target) string {
	if r.Guards == nil {
		return ""
	}
	byServer := needsRequesterCheck(vr, dest)
	_, stamped := policy.RequesterOf(vr.Annotations)
	madeBySync := syncControlling(vr) != "" && !stamped
	what := "this VidraResource was written by a person, whose right and stamp they check"
	switch {
	case byServer:
		what = "this VidraResource names its cluster by server URL"
	case madeBySync:
		what = "this VidraResource names a sync as its controller, which only they keep a person from writing"
	}
	if why := r.Guards.Refusal(ctx, what); why != "" {
		return why
	}
	if byServer && !stamped && !madeBySync {
		return "this VidraResource names its cluster by server URL and does not say who asked for it (it was written while the " +
			"requester policy was not in force), so whether its author may deliver there cannot be checked: apply its spec again to have it recorded"
	}
	return ""
}

// recordRefusal says why what the VidraResource records of who asked for it is not to
// be trusted: it was last written while an admission policy was not in force. One a
// sync made (controlled by it and labeled as its own, without a stamp) is the operator's,
// which syncs nothing while a policy is missing: after a gap the sync prunes any such
// VidraResource it did not make, and writes over those it did.
func (r *Reconciler) recordRefusal(vr *vidrav1alpha1.VidraResource) string {
	if _, stamped := policy.RequesterOf(vr.Annotations); !stamped && syncOwned(vr) {
		return ""
	}
	return r.Guards.RecordRefusal(vr, "this VidraResource")
}

// needsRequesterCheck says whether the operator alone can check who may deliver the
// VidraResource: its destination is a server URL other than the hub's.
func needsRequesterCheck(vr *vidrav1alpha1.VidraResource, dest *target) bool {
	return vr.Spec.Destination.Server != "" && vr.Spec.Destination.Cluster == "" && (dest == nil || dest.name != destination.LocalCluster)
}

// syncControlling is the kind of the sync that controls the VidraResource ("" when none
// does): the operator made it, and admission checked the sync.
func syncControlling(vr *vidrav1alpha1.VidraResource) string {
	owner := metav1.GetControllerOf(vr)
	if owner == nil {
		return ""
	}
	gv, err := schema.ParseGroupVersion(owner.APIVersion)
	if err != nil || gv.Group != vidrav1alpha1.GroupVersion.Group {
		return ""
	}
	for _, k := range vidrav1alpha1.SyncKinds() {
		if k.Kind == owner.Kind {
			return k.Kind
		}
	}
	return ""
}

// syncOwned says whether a sync controls the VidraResource and labels it as its own, as
// the VidraResources it makes are.
func syncOwned(vr *vidrav1alpha1.VidraResource) bool {
	controller := syncControlling(vr)
	kind, name := vidrav1alpha1.SyncOf(vr.Labels)
	return controller != "" && controller == kind.Kind && name == metav1.GetControllerOf(vr).Name
}

// resourcesRelyingOnGuards requeues the VidraResources an admission policy's change may
// refuse or release: every one.
func (r *Reconciler) resourcesRelyingOnGuards(ctx context.Context, _ client.Object) []reconcile.Request {
	var list vidrav1alpha1.VidraResourceList
	// Only names are read: a fleet's ten thousand VidraResources are not copied.
	if err := r.Hub.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "list VidraResources an admission policy's change may refuse")
		return nil
	}
	requests := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return requests
}
