package vidraresource

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/admissionguard"
	"github.com/vidra-operator/vidra/internal/fleet/destination"
	"github.com/vidra-operator/vidra/internal/fleet/policy"
)

// PolicySource gives an enrolled cluster's delivery policy (the cluster provider does).
type PolicySource interface {
	Policy(name multicluster.ClusterName) (pol policy.Policy, engaged bool, err error)
}

// namespacesNarrowed says whether the cluster's delivery policy narrows it to namespaces:
// its identity may then not list or watch what lies outside them.
func (r *Reconciler) namespacesNarrowed(dest *target) bool {
	if dest.name == destination.LocalCluster {
		return len(r.LocalPolicy.AllowedNamespaces) > 0
	}
	if r.Policies == nil {
		return false
	}
	pol, engaged, err := r.Policies.Policy(dest.name)
	return engaged && err == nil && len(pol.AllowedNamespaces) > 0
}

// checkRight stalls a bundle whose requester may not deliver where it is meant to, or
// that relies on admission policies that are missing: checked before the bundle is read,
// so a VidraResource that may not go anywhere costs no read or decoding of its content.
func (r *Reconciler) checkRight(ctx context.Context, d *delivery) *outcome {
	return r.stallRefused(d, r.rightRefusal(ctx, d.vr, d.dest))
}

// rightRefusal checks what needs no object of the bundle: that the admission policies it
// relies on are in force, and that whoever last changed the VidraResource may deliver to
// the cluster its server URL names (admission decides every other destination).
func (r *Reconciler) rightRefusal(ctx context.Context, vr *vidrav1alpha1.VidraResource, dest *target) refusal {
	if why := r.guardRefusal(ctx, vr, dest); why != "" {
		// Looked at again now and then; a change of the policies requeues it at once.
		return refusal{why: why, retry: admissionguard.Retry, reason: vidrav1alpha1.ReasonAdmissionPoliciesMissing}
	}
	if why := r.recordRefusal(vr); why != "" {
		return refusal{why: why}
	}
	if why, retry := r.deliverRefusal(ctx, vr, dest); why != "" {
		return refusal{why: why, retry: retry}
	}
	return refusal{}
}

// checkPolicy stalls a bundle that may not go where it is meant to, before anything
// reaches the cluster: it is looked at again when the policy or the spec changes.
func (r *Reconciler) checkPolicy(ctx context.Context, d *delivery) *outcome {
	return r.stallRefused(d, r.whyRefused(ctx, d.vr, d.dest, d.objects))
}

// checkPlacement checks again once the destination namespace joins the bundle: the
// Namespace the apply creates is delivered like any object of it.
func (r *Reconciler) checkPlacement(ctx context.Context, d *delivery) *outcome {
	if !d.addedNamespace {
		return nil
	}
	return r.stallRefused(d, r.whyRefused(ctx, d.vr, d.dest, d.objects))
}

func (r *Reconciler) stallRefused(d *delivery, denied refusal) *outcome {
	if denied.err != nil {
		// Not refused: shown as failing until a retry can judge the bundle.
		markNotReady(d.vr, vidrav1alpha1.ReasonApplyFailed, denied.err.Error())
		return stop(ctrl.Result{}, denied.err)
	}
	if denied.why == "" {
		return nil
	}
	reason := denied.reason
	if reason == "" {
		reason = vidrav1alpha1.ReasonPolicyDenied
	}
	markStalled(d.vr, reason, denied.why)
	r.event(d.vr, corev1.EventTypeWarning, reason, denied.why)
	return stop(ctrl.Result{RequeueAfter: denied.retry}, nil)
}

// refusal is why a bundle may not go to its destination; retry, when set, is how soon
// it is worth looking again without a change (a kind the cluster may serve by then).
type refusal struct {
	why   string
	retry time.Duration
	// err, when set, is why the check could not be made (a discovery request failed):
	// nothing is refused, the check is retried with backoff.
	err error
	// reason is the condition's reason; empty: PolicyDenied.
	reason string
}

// unmappedRetry is how soon a bundle refused for a kind its cluster does not serve yet
// is looked at again.
const unmappedRetry = 10 * time.Second

// whyRefused checks the bundle's objects, once rightRefusal has passed: that nothing of
// them touches what the hub keeps for itself, and the cluster's delivery policy. Objects
// are placed as the apply would place them (namespaces defaulted, cluster-scoped ones
// without); where a kind is not served yet, so that its scope is not known, a check that
// restricts anything refuses the bundle (fail closed).
func (r *Reconciler) whyRefused(ctx context.Context, vr *vidrav1alpha1.VidraResource, dest *target, objects []*unstructured.Unstructured) refusal {
	var check func([]policy.Object) *policy.DeniedError
	if dest.name == destination.LocalCluster {
		check = func(objs []policy.Object) *policy.DeniedError {
			if denied := r.HubGuard.Check(objs, vr.Spec.Destination.Namespace); denied != nil || !r.LocalPolicy.Restricts() {
				return denied
			}
			return r.LocalPolicy.Check(objs, vr.Spec.Destination.Namespace, vr.Spec.ServiceAccountName)
		}
	} else if r.Policies != nil {
		pol, engaged, err := r.Policies.Policy(dest.name)
		switch {
		case !engaged || (err == nil && !pol.Restricts()):
			return refusal{}
		case err != nil:
			return refusal{why: "the cluster's delivery policy does not parse, so nothing is delivered: " + err.Error()}
		}
		check = func(objs []policy.Object) *policy.DeniedError {
			return pol.Check(objs, vr.Spec.Destination.Namespace, vr.Spec.ServiceAccountName)
		}
	}
	if check == nil {
		return refusal{}
	}
	placed, unmapped, unmappable := r.placeForPolicy(ctx, vr, dest, objects)
	if unmappable != nil {
		return refusal{err: fmt.Errorf("place the bundle's objects for the delivery policy: %w", unmappable)}
	}
	if denied := check(placed); denied != nil {
		return refusal{why: "refused by " + r.ruleOwner(dest) + ", nothing applied: " + denied.Error()}
	}
	if len(unmapped) > 0 {
		return refusal{retry: unmappedRetry, why: fmt.Sprintf("refused by %s, nothing applied: %s: the cluster does not serve this kind yet, so where it would go cannot be checked (looked at again every %s)",
			r.ruleOwner(dest), strings.Join(unmapped, ", "), unmappedRetry)}
	}
	return refusal{}
}

func (r *Reconciler) ruleOwner(dest *target) string {
	if dest.name == destination.LocalCluster && r.LocalPolicy.Restricts() {
		return "the cluster's own delivery policy"
	}
	if dest.name == destination.LocalCluster {
		return "the hub's guard of its own state"
	}
	return "the cluster's delivery policy"
}

// placeForPolicy places each object as the apply would; unmapped names the objects that
// cannot be placed yet, their kinds not served; unmappable is why others could not be
// mapped at all (discovery failed), so that nothing is judged.
func (r *Reconciler) placeForPolicy(ctx context.Context, vr *vidrav1alpha1.VidraResource, dest *target, objects []*unstructured.Unstructured) (placed []policy.Object, unmapped []string, unmappable error) {
	refs, errs := refsOf(r.engine(ctx, vr, dest, placement{}), objects)
	var failed []error
	for _, err := range errs {
		u := (*unplacedError)(nil)
		switch {
		case !errors.As(err, &u):
		case meta.IsNoMatchError(u.err):
			unmapped = append(unmapped, fmt.Sprintf("%s %s", policy.KindName(u.object.GroupVersionKind().GroupKind()), u.object.GetName()))
		default: // discovery failed: whether the kind is served is not known
			failed = append(failed, u.err)
		}
	}
	if len(failed) > 0 {
		return nil, nil, errors.Join(failed...)
	}
	placed = make([]policy.Object, 0, len(refs))
	for _, ref := range refs {
		placed = append(placed, policy.Object{GVK: ref.GVK, Namespace: ref.Namespace, Name: ref.Name})
	}
	return placed, unmapped, nil
}

// deliverRefusal checks that whoever last changed the VidraResource may deliver to its
// cluster: for a destination given as a server URL other than the hub's always, as
// admission cannot (the URL names a cluster only here); for any destination on a hub
// whose admission policies the operator relies on, since admission checked nothing while
// one was missing, and what was written then is delivered once they are back. A
// VidraResource without a recorded requester was written by the operator (a sync, which
// admission checked) or before the admission policy was installed.
func (r *Reconciler) deliverRefusal(ctx context.Context, vr *vidrav1alpha1.VidraResource, dest *target) (why string, retry time.Duration) {
	who, recorded := policy.RequesterOf(vr.Annotations)
	if !recorded || dest == nil || (r.Guards == nil && !needsRequesterCheck(vr, dest)) {
		return "", 0
	}
	cluster := string(dest.name)
	if dest.name == destination.LocalCluster {
		cluster = vidrav1alpha1.LocalClusterName
	}
	reach := policy.BundleReach(cluster, vr.Spec.Destination.Namespace, vr.Spec.ServiceAccountName)
	asked := answer{generation: vr.Generation, who: who, about: reach.Key()}
	if last, ok := r.deliverChecks.Load(vr.Name); ok && last.(answer).answers(asked) {
		return last.(answer).why, 0
	}
	why, err := reach.Refusal(ctx, r.Hub, who)
	if err != nil {
		// Not remembered: asked again soon.
		return "whether " + who.User + " may deliver there cannot be checked yet, so nothing is delivered: " + err.Error(), unmappedRetry
	}
	asked.why, asked.at = why, time.Now()
	r.deliverChecks.Store(vr.Name, asked)
	return why, 0
}

// deliverCheckTTL is how long the answer of one SubjectAccessReview is reused: a right
// taken away holds within it.
const deliverCheckTTL = time.Minute

// answer is the last answer to a question about whoever last changed a VidraResource's
// spec (may they deliver to a cluster, deliver a stored digest): why not ("" when they
// may), and when it was given.
type answer struct {
	generation int64
	who        policy.Requester
	// about is what was asked about: the cluster, or the digest.
	about string
	why   string
	at    time.Time
}

// answers says whether a is the answer to asked, and recent enough to reuse.
func (a answer) answers(asked answer) bool {
	return a.generation == asked.generation && a.about == asked.about && a.who.Key() == asked.who.Key() &&
		time.Since(a.at) < deliverCheckTTL
}
