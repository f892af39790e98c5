package identity

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// MinTokenTTL is the shortest token lifetime the API server grants.
const MinTokenTTL = 10 * time.Minute

// Apply creates or updates the identity on the member with c (the enrolling user's
// credentials): namespaces that do not exist are created and marked, the objects are
// server-side applied, and objects of the same identity that the spec no longer lists
// (a namespace dropped from --namespaces) are deleted. dryRun has the member validate
// everything without storing it. It returns what it did, one line per object.
func Apply(ctx context.Context, c client.Client, s Spec, dryRun bool) ([]string, error) {
	var done []string
	var createOpts []client.CreateOption
	var deleteOpts []client.DeleteOption
	suffix := ""
	if dryRun {
		createOpts, deleteOpts, suffix = []client.CreateOption{client.DryRunAll}, []client.DeleteOption{client.DryRunAll}, " (server dry run)"
	}
	if err := refuseForeignServiceAccount(ctx, c, s.ServiceAccount); err != nil {
		return nil, err
	}
	for _, ns := range s.NeededNamespaces() {
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		// Only the identity's own namespace goes with it on unenroll: a namespace it may
		// deliver to holds what was delivered, which stays.
		if ns == s.ServiceAccount.Namespace && !slices.Contains(s.Namespaces, ns) {
			obj.Annotations = map[string]string{CreatedNamespaceAnnotation: labelValue(s.ServiceAccount)}
		}
		err := c.Create(ctx, obj, createOpts...)
		switch {
		case err == nil:
			done = append(done, "namespace/"+ns+" created"+suffix)
		case apierrors.IsAlreadyExists(err):
		default:
			return done, fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	keep := map[string]bool{}
	objs := s.Objects()
	for _, obj := range objs {
		keep[Describe(obj)] = true
	}
	applied, err := ApplyObjects(ctx, c, objs, dryRun)
	done = append(done, applied...)
	if err != nil {
		return done, err
	}
	stale, err := listOwned(ctx, c, s.ServiceAccount)
	if err != nil {
		return done, err
	}
	for _, obj := range stale {
		if ref := Describe(obj); !keep[ref] {
			if err := client.IgnoreNotFound(c.Delete(ctx, obj, deleteOpts...)); err != nil {
				return done, fmt.Errorf("delete %s: %w", ref, err)
			}
			done = append(done, ref+" deleted"+suffix)
		}
	}
	return done, nil
}

// Remove deletes every object of the identity of sa from the member, and its namespace
// if enrollment created it. Objects already gone are fine; it returns what it deleted.
func Remove(ctx context.Context, c client.Client, sa types.NamespacedName, dryRun bool) ([]string, error) {
	var opts []client.DeleteOption
	suffix := ""
	if dryRun {
		opts, suffix = []client.DeleteOption{client.DryRunAll}, " (server dry run)"
	}
	// Only objects with the identity's label: a ServiceAccount of the same name that
	// enroll did not create (an operator's own) is never touched.
	objs, err := listOwned(ctx, c, sa)
	if err != nil {
		return nil, err
	}
	// The ServiceAccount first: its tokens stop working the moment it is gone.
	slices.SortStableFunc(objs, func(a, b client.Object) int {
		_, aSA := a.(*corev1.ServiceAccount)
		_, bSA := b.(*corev1.ServiceAccount)
		switch {
		case aSA && !bSA:
			return -1
		case bSA && !aSA:
			return 1
		}
		return 0
	})
	var done []string
	for _, obj := range objs {
		err := c.Delete(ctx, obj, opts...)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return done, fmt.Errorf("delete %s: %w", Describe(obj), err)
		default:
			done = append(done, Describe(obj)+" deleted"+suffix)
		}
	}
	ns := &corev1.Namespace{}
	err = c.Get(ctx, client.ObjectKey{Name: sa.Namespace}, ns)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return done, fmt.Errorf("read namespace %s: %w", sa.Namespace, err)
	case ns.Annotations[CreatedNamespaceAnnotation] == labelValue(sa) && ns.DeletionTimestamp.IsZero():
		// Another identity (or anything else with a ServiceAccount) living there keeps it.
		var others corev1.ServiceAccountList
		if err := c.List(ctx, &others, client.InNamespace(sa.Namespace)); err != nil {
			return done, fmt.Errorf("list service accounts in %s: %w", sa.Namespace, err)
		}
		for _, o := range others.Items {
			if o.Name != "default" && o.Name != sa.Name {
				return done, nil
			}
		}
		if err := client.IgnoreNotFound(c.Delete(ctx, ns, opts...)); err != nil {
			return done, fmt.Errorf("delete namespace %s: %w", sa.Namespace, err)
		}
		done = append(done, "namespace/"+sa.Namespace+" deleted"+suffix)
	}
	return done, nil
}

// refuseForeignServiceAccount refuses to take over a ServiceAccount of that name that
// enroll did not create: it belongs to someone else (an operator running on the member).
func refuseForeignServiceAccount(ctx context.Context, c client.Client, sa types.NamespacedName) error {
	existing := &corev1.ServiceAccount{}
	err := c.Get(ctx, sa, existing)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("read service account %s: %w", sa, err)
	case existing.Labels[Label] != labelValue(sa):
		return fmt.Errorf("service account %s exists on the member and was not created by kubectl vidra enroll; name another with --service-account", sa)
	}
	return nil
}

// listOwned lists the identity's RBAC objects and ServiceAccount by its label.
func listOwned(ctx context.Context, c client.Client, sa types.NamespacedName) ([]client.Object, error) {
	objs, err := ListLabeled(ctx, c, client.MatchingLabels{Label: labelValue(sa)},
		&rbacv1.ClusterRoleBindingList{}, &rbacv1.ClusterRoleList{}, &rbacv1.RoleBindingList{}, &rbacv1.RoleList{}, &corev1.ServiceAccountList{})
	if err != nil {
		return nil, fmt.Errorf("identity %s: %w", sa, err)
	}
	return objs, nil
}

// ListLabeled lists the objects of each list's kind that labels select, each with its
// kind set (a typed list leaves it empty), so that Describe names it.
func ListLabeled(ctx context.Context, c client.Client, labels client.MatchingLabels, lists ...client.ObjectList) ([]client.Object, error) {
	var out []client.Object
	for _, list := range lists {
		gvk, err := apiutil.GVKForObject(list, c.Scheme())
		if err != nil {
			return nil, err
		}
		gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
		if err := c.List(ctx, list, labels); err != nil {
			return nil, fmt.Errorf("list %ss: %w", gvk.Kind, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, fmt.Errorf("list %ss: %w", gvk.Kind, err)
		}
		for _, item := range items {
			obj := item.(client.Object)
			obj.GetObjectKind().SetGroupVersionKind(gvk)
			out = append(out, obj)
		}
	}
	return out, nil
}

// ApplyObjects server-side applies objs (each with its kind set) with enrollment's field
// manager, taking their fields over, in order, and says what it did, one line each.
// dryRun has the API server validate them without storing them.
func ApplyObjects(ctx context.Context, c client.Client, objs []client.Object, dryRun bool) ([]string, error) {
	var done []string
	opts := []client.ApplyOption{client.FieldOwner(FieldOwner), client.ForceOwnership}
	suffix := ""
	if dryRun {
		opts, suffix = append(opts, client.DryRunAll), " (server dry run)"
	}
	for _, obj := range objs {
		ref := Describe(obj)
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return done, fmt.Errorf("apply %s: %w", ref, err)
		}
		applied := &unstructured.Unstructured{Object: content}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied), opts...); err != nil {
			if dryRun && apierrors.IsNotFound(err) {
				// A namespace created only in a dry run does not exist for the next request.
				done = append(done, ref+" configured"+suffix)
				continue
			}
			return done, fmt.Errorf("apply %s: %w", ref, err)
		}
		done = append(done, ref+" configured"+suffix)
	}
	return done, nil
}

// Describe names an object as kubectl prints it: kind/name, with its namespace.
func Describe(obj client.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if obj.GetNamespace() == "" {
		return fmt.Sprintf("%s/%s", kind, obj.GetName())
	}
	return fmt.Sprintf("%s/%s -n %s", kind, obj.GetName(), obj.GetNamespace())
}

// Token is a token of the identity and when it stops working.
type Token struct {
	Value     string
	ExpiresAt time.Time
}

// RequestToken asks the member for a token of sa that lives ttl, through the TokenRequest
// API. c may be the user's credentials (at enrollment) or the identity's own (renewal).
func RequestToken(ctx context.Context, c client.Client, sa types.NamespacedName, ttl time.Duration) (Token, error) {
	if ttl < MinTokenTTL {
		return Token{}, fmt.Errorf("token lifetime %s is shorter than the API server's minimum, %s", ttl, MinTokenTTL)
	}
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: sa.Namespace, Name: sa.Name}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(ttl / time.Second))}}
	if err := c.SubResource("token").Create(ctx, account, req); err != nil {
		return Token{}, fmt.Errorf("request a token for service account %s: %w", sa, err)
	}
	if req.Status.Token == "" {
		return Token{}, errors.New("request a token for service account " + sa.String() + ": the API server returned none")
	}
	return Token{Value: req.Status.Token, ExpiresAt: req.Status.ExpirationTimestamp.Time}, nil
}
