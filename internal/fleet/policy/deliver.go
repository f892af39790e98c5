package policy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Requester is who last wrote a VidraResource's spec: all the API server told admission
// of them, so that an authorizer that reads a UID or extra attributes (a webhook, a
// token bound to a node) judges them as it judged the request.
type Requester struct {
	User   string
	Groups []string
	UID    string
	Extra  map[string][]string
}

// RequesterOf reads the requester the admission policy recorded; false when none is.
func RequesterOf(annotations map[string]string) (Requester, bool) {
	user := annotations[vidrav1alpha1.RequestedByAnnotation]
	if user == "" {
		return Requester{}, false
	}
	who := Requester{User: user, UID: annotations[vidrav1alpha1.RequestedByUIDAnnotation]}
	for _, g := range strings.Split(annotations[vidrav1alpha1.RequestedByGroupsAnnotation], ",") {
		if g != "" {
			who.Groups = append(who.Groups, unescaper.Replace(g))
		}
	}
	for _, entry := range strings.Split(annotations[vidrav1alpha1.RequestedByExtraAnnotation], ";") {
		key, values, ok := strings.Cut(entry, "=")
		if !ok || key == "" {
			continue
		}
		if who.Extra == nil {
			who.Extra = map[string][]string{}
		}
		k := unescaper.Replace(key)
		for _, v := range strings.Split(values, ",") {
			who.Extra[k] = append(who.Extra[k], unescaper.Replace(v))
		}
	}
	return who, true
}

// Key is a string that only the same requester has, to key remembered answers by.
func (a Requester) Key() string {
	parts := []string{a.User, a.UID, strings.Join(a.Groups, "\x01")}
	for _, k := range slices.Sorted(maps.Keys(a.Extra)) {
		parts = append(parts, k+"\x01"+strings.Join(a.Extra[k], "\x01"))
	}
	return strings.Join(parts, "\x00")
}

// unescaper undoes the admission policy's escaping of group names and extra attributes
// (%, ",", ";" and "=" as %25, %2C, %3B and %3D), so that no separator in a name splits it.
var unescaper = strings.NewReplacer("%2C", ",", "%3B", ";", "%3D", "=", "%25", "%")

// DeliverRight spells the RBAC right that lets a person deliver to the cluster.
func DeliverRight(cluster string) string {
	return fmt.Sprintf("the verb %s on vidraclusters named %s (API group %s)", vidrav1alpha1.DeliverVerb, cluster, vidrav1alpha1.GroupVersion.Group)
}

// ReviewDeliver asks the API server whether who may deliver to the cluster (the verb
// deliver on vidraclusters named for it): about the caller itself, a
// SelfSubjectAccessReview, when who is nil.
func ReviewDeliver(ctx context.Context, c client.Client, who *Requester, cluster string) (authorizationv1.SubjectAccessReviewStatus, error) {
	attributes := &authorizationv1.ResourceAttributes{
		Group:    vidrav1alpha1.GroupVersion.Group,
		Resource: "vidraclusters",
		Name:     cluster,
		Verb:     vidrav1alpha1.DeliverVerb,
	}
	if who == nil {
		self := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attributes}}
		err := c.Create(ctx, self)
		return self.Status, err
	}
	return review(ctx, c, *who, attributes)
}

// review asks the API server whether who may act as attributes say.
func review(ctx context.Context, c client.Client, who Requester, attributes *authorizationv1.ResourceAttributes) (authorizationv1.SubjectAccessReviewStatus, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: who.ReviewSpec()}
	sar.Spec.ResourceAttributes = attributes
	err := c.Create(ctx, sar)
	return sar.Status, err
}

// ReviewSpec is a SubjectAccessReview's spec about who, without the attributes asked about.
func (who Requester) ReviewSpec() authorizationv1.SubjectAccessReviewSpec {
	spec := authorizationv1.SubjectAccessReviewSpec{User: who.User, Groups: who.Groups, UID: who.UID}
	if len(who.Extra) > 0 {
		spec.Extra = make(map[string]authorizationv1.ExtraValue, len(who.Extra))
		for k, v := range who.Extra {
			spec.Extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	return spec
}

// MayDeliver asks the API server whether the requester may deliver to the cluster, and
// says why not when they may not.
func MayDeliver(ctx context.Context, c client.Client, who Requester, cluster string) (bool, string, error) {
	status, err := ReviewDeliver(ctx, c, &who, cluster)
	if err != nil {
		return false, "", fmt.Errorf("review whether %s may deliver to cluster %s: %w", who.User, cluster, err)
	}
	if status.Allowed {
		return true, "", nil
	}
	why := fmt.Sprintf("%s, who last changed it, may not deliver to cluster %s: that needs %s", who.User, cluster, DeliverRight(cluster))
	if cluster == "" {
		why = fmt.Sprintf("%s, who last changed it, may not deliver to every cluster (by clusterSelector, clusterFromTarget or a server URL): "+
			"that needs the verb %s on vidraclusters without resourceNames (API group %s)", who.User, vidrav1alpha1.DeliverVerb, vidrav1alpha1.GroupVersion.Group)
	}
	if r := strings.TrimSpace(status.Reason); r != "" {
		why += " (" + r + ")"
	}
	return false, why, nil
}

// MayGet asks the API server whether the requester may get the core object of resource
// (configmaps, secrets) named name in namespace.
func MayGet(ctx context.Context, c client.Client, who Requester, resource, namespace, name string) (bool, error) {
	status, err := review(ctx, c, who, &authorizationv1.ResourceAttributes{Resource: resource, Namespace: namespace, Name: name, Verb: "get"})
	if err != nil {
		return false, fmt.Errorf("review whether %s may get %s %s/%s: %w", who.User, resource, namespace, name, err)
	}
	return status.Allowed, nil
}
