package pull

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/identity"
)

// Unenroll removes a pull cluster from both sides, with the user's clients, in the order
// that leaves the agent nothing to act on: its hub ServiceAccount first (its tokens stop
// working at once), then on the member its Deployment and its RBAC bindings (a running
// agent, however started, may write nothing more), its copies of the bundles (their
// finalizers dropped: what they delivered stays, as for a push cluster), the rest of its
// objects, the identity it applied as, and Vidra's CRDs when nothing else uses them; then
// the rest of the hub's side (UnenrollHub). It returns what it did, one line each.
func Unenroll(ctx context.Context, hub, member client.Client, cluster, agentNamespace string, secret *corev1.Secret) ([]string, error) {
	var done []string
	note := func(where string, lines []string) {
		for _, l := range lines {
			done = append(done, l+" (on the "+where+")")
		}
	}
	lines, err := revokeHubIdentity(ctx, hub, cluster)
	note("hub", lines)
	if err != nil {
		return done, err
	}
	lines, err = removeAgent(ctx, member, cluster, agentNamespace)
	note("member", lines)
	if err != nil {
		return done, fmt.Errorf("remove the agent: %w", err)
	}
	lines, err = UnenrollHub(ctx, hub, secret, cluster)
	note("hub", lines)
	return done, err
}

// revokeHubIdentity deletes the agent's ServiceAccount on the hub: its tokens stop working
// at once.
func revokeHubIdentity(ctx context.Context, hub client.Client, cluster string) ([]string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace(cluster), Name: AgentName}}
	switch err := hub.Delete(ctx, sa); {
	case err == nil:
		return []string{"serviceaccount/" + AgentName + " -n " + sa.Namespace + " deleted: the agent's tokens no longer work"}, nil
	case apierrors.IsNotFound(err):
		return nil, nil
	default:
		return nil, fmt.Errorf("delete the agent's ServiceAccount on the hub: %w", err)
	}
}

// agentObjects are the kinds of the agent's objects on the member, in the order they are
// removed: what lets it act first.
func agentObjects() []client.ObjectList {
	return []client.ObjectList{&appsv1.DeploymentList{}, &rbacv1.ClusterRoleBindingList{}, &rbacv1.RoleBindingList{},
		&rbacv1.ClusterRoleList{}, &rbacv1.RoleList{}, &corev1.SecretList{}, &corev1.ServiceAccountList{}}
}

// removeAgent removes everything enrollment made on the member.
func removeAgent(ctx context.Context, c client.Client, cluster, agentNamespace string) ([]string, error) {
	var done []string
	agent := types.NamespacedName{Namespace: agentNamespace, Name: AgentName}
	delivery := identity.DefaultServiceAccount
	s := &corev1.Secret{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: agent.Namespace, Name: vidrav1alpha1.AgentSecretName}, s); {
	case err == nil:
		if sa, err := identity.ParseServiceAccount(string(s.Data[DeliveryAccountKey])); err == nil {
			delivery = sa
		}
	case !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err):
		return nil, fmt.Errorf("read the agent's Secret: %w", err)
	}
	selector := client.MatchingLabels{AgentLabel: agent.Namespace + "." + agent.Name}
	for _, list := range agentObjects() {
		if _, ok := list.(*rbacv1.ClusterRoleList); ok {
			// Its bindings are gone: once the member's authorizer agrees, no agent can
			// write a copy again, and the copies can go.
			if err := waitRevoked(ctx, c, agent); err != nil {
				// Another binding (of a group every ServiceAccount is in, say) still lets
				// it: its Deployment and hub identity are gone, so go on, and say so.
				done = append(done, "warning: "+err.Error()+"; its copies are removed anyway")
			}
			copies, err := dropCopies(ctx, c, cluster)
			done = append(done, copies...)
			if err != nil {
				return done, err
			}
		}
		deleted, err := deleteAll(ctx, c, list, selector)
		done = append(done, deleted...)
		if err != nil {
			return done, err
		}
	}
	removed, err := identity.Remove(ctx, c, delivery, false)
	done = append(done, removed...)
	if err != nil {
		return done, err
	}
	crds, err := removeIdleCRDs(ctx, c)
	return append(done, crds...), err
}

// deleteAll deletes the objects of list's kind that labels select.
func deleteAll(ctx context.Context, c client.Client, list client.ObjectList, labels client.MatchingLabels) ([]string, error) {
	objs, err := identity.ListLabeled(ctx, c, labels, list)
	if err != nil {
		return nil, fmt.Errorf("the agent's objects: %w", err)
	}
	var done []string
	for _, obj := range objs {
		if err := client.IgnoreNotFound(c.Delete(ctx, obj)); err != nil {
			return done, fmt.Errorf("delete %s: %w", identity.Describe(obj), err)
		}
		done = append(done, identity.Describe(obj)+" deleted")
	}
	return done, nil
}

// waitRevoked waits until the member's authorizer no longer lets the agent create
// VidraResources.
func waitRevoked(ctx context.Context, c client.Client, agent types.NamespacedName) error {
	user := "system:serviceaccount:" + agent.Namespace + ":" + agent.Name
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + agent.Namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: vidrav1alpha1.GroupVersion.Group, Resource: "vidraresources", Verb: "create"}}}
		if err := c.Create(ctx, review); err != nil {
			return false, err
		}
		return !review.Status.Allowed, nil
	})
	if err != nil {
		return fmt.Errorf("the member still lets the agent %s write VidraResources: %w", agent, err)
	}
	return nil
}

// dropCopies deletes the agent's copies of the cluster's bundles without releasing what
// they delivered: once the agent is gone, nothing would.
func dropCopies(ctx context.Context, c client.Client, cluster string) ([]string, error) {
	var list vidrav1alpha1.VidraResourceList
	if err := c.List(ctx, &list, client.MatchingLabels{vidrav1alpha1.PulledFromLabel: cluster}); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list the agent's copies: %w", err)
	}
	var done []string
	for i := range list.Items {
		vr := &list.Items[i]
		before := vr.DeepCopy()
		if controllerutil.RemoveFinalizer(vr, vidrav1alpha1.VidraResourceFinalizer) {
			if err := client.IgnoreNotFound(c.Patch(ctx, vr, client.MergeFrom(before))); err != nil {
				return done, fmt.Errorf("let go of vidraresource %s: %w", vr.Name, err)
			}
		}
		if err := client.IgnoreNotFound(c.Delete(ctx, vr)); err != nil {
			return done, fmt.Errorf("delete vidraresource %s: %w", vr.Name, err)
		}
		done = append(done, "vidraresource/"+vr.Name+" deleted (what it delivered stays)")
	}
	return done, nil
}

// removeIdleCRDs deletes the CRDs enroll installed, unless VidraResources of the member's
// own still use them.
func removeIdleCRDs(ctx context.Context, c client.Client) ([]string, error) {
	var vrs vidrav1alpha1.VidraResourceList
	if err := c.List(ctx, &vrs, client.Limit(1)); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list VidraResources: %w", err)
	}
	if len(vrs.Items) > 0 {
		return []string{"Vidra's CRDs kept: the member has VidraResources of its own"}, nil
	}
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := c.List(ctx, &crds, client.MatchingLabels{InstalledByEnrollLabel: "true"}); err != nil {
		return nil, fmt.Errorf("list CRDs: %w", err)
	}
	var done []string
	for i := range crds.Items {
		if err := client.IgnoreNotFound(c.Delete(ctx, &crds.Items[i])); err != nil {
			return done, fmt.Errorf("delete CRD %s: %w", crds.Items[i].Name, err)
		}
		done = append(done, "customresourcedefinition/"+crds.Items[i].Name+" deleted")
	}
	return done, nil
}

// UnenrollHub removes a pull cluster's side on the hub: the enrollment Secret first (the
// operator stops publishing to it), then the cluster's namespace, its bundles let go
// first (their agent is gone). On its own it removes a pull cluster whose member is gone;
// what enrollment made on the member then stays there.
func UnenrollHub(ctx context.Context, hub client.Client, secret *corev1.Secret, cluster string) ([]string, error) {
	done, err := revokeHubIdentity(ctx, hub, cluster)
	if err != nil {
		return done, err
	}
	if secret != nil {
		if err := client.IgnoreNotFound(hub.Delete(ctx, secret)); err != nil {
			return done, fmt.Errorf("delete secret %s/%s: %w", secret.Namespace, secret.Name, err)
		}
		done = append(done, "secret/"+secret.Name+" -n "+secret.Namespace+" deleted")
	}
	// Once the operator has let the cluster go (its VidraCluster is gone), it publishes
	// nothing more there; an operator that is down lets nothing wait long.
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := hub.Get(ctx, client.ObjectKey{Name: cluster}, &vidrav1alpha1.VidraCluster{})
		return apierrors.IsNotFound(err) || meta.IsNoMatchError(err), nil
	})
	ns := Namespace(cluster)
	var bundles vidrav1alpha1.VidraBundleList
	if err := hub.List(ctx, &bundles, client.InNamespace(ns)); err != nil && !meta.IsNoMatchError(err) {
		return done, fmt.Errorf("list the bundles of %s: %w", ns, err)
	}
	for i := range bundles.Items {
		b := &bundles.Items[i]
		before := b.DeepCopy()
		if controllerutil.RemoveFinalizer(b, vidrav1alpha1.AgentReleaseFinalizer) {
			if err := client.IgnoreNotFound(hub.Patch(ctx, b, client.MergeFrom(before))); err != nil {
				return done, fmt.Errorf("let go of vidrabundle %s/%s: %w", ns, b.Name, err)
			}
		}
	}
	err = hub.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	switch {
	case err == nil:
		done = append(done, "namespace/"+ns+" deleted (with the agent's identity, heartbeat, bundles and content)")
	case !apierrors.IsNotFound(err):
		return done, fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	return done, nil
}
