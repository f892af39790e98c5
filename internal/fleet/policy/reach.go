package policy

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/destination"
)

// Reach is where a VidraResource or a sync delivers, as the chart's deliver policy reads
// it at admission; the operator asks the same of the API server again where admission
// may have checked nothing (while a policy was missing).
type Reach struct {
	// Everywhere: a sync that reaches clusters by selector, by its artifacts' targets, or
	// by a member's server URL.
	Everywhere bool
	// Cluster is the one cluster otherwise (vidrav1alpha1.LocalClusterName: the hub).
	Cluster string
	// ServiceAccount, in Namespace, is what a bundle for the hub runs as ("": the chart's).
	ServiceAccount, Namespace string
}

// SyncReach is where a sync delivers: by selector (or by its artifacts' targets), to a
// member named by server URL, or to one cluster, with its template's ServiceAccount.
func SyncReach(d vidrav1alpha1.Destination, bySelector bool, tpl *vidrav1alpha1.VidraResourceTemplate) Reach {
	var serviceAccount string
	if tpl != nil {
		serviceAccount = tpl.ServiceAccountName
	}
	switch {
	case bySelector || (d.Cluster == "" && !destination.NamesHub(d.Server)):
		r := BundleReach("", d.Namespace, serviceAccount)
		r.Everywhere = true
		return r
	case d.Cluster != "":
		return BundleReach(d.Cluster, d.Namespace, serviceAccount)
	}
	return BundleReach(vidrav1alpha1.LocalClusterName, d.Namespace, serviceAccount)
}

// BundleReach is where a bundle for cluster, into namespace (none: default), run as
// serviceAccount, delivers.
func BundleReach(cluster, namespace, serviceAccount string) Reach {
	if namespace == "" {
		namespace = "default"
	}
	return Reach{Cluster: cluster, Namespace: namespace, ServiceAccount: serviceAccount}
}

// Key identifies the reach, for answers kept a while.
func (r Reach) Key() string {
	return fmt.Sprintf("%t/%s/%s/%s", r.Everywhere, r.Cluster, r.Namespace, r.ServiceAccount)
}

// Refusal asks the API server whether who may deliver where r says, and run as its
// ServiceAccount on the hub: why not, "" when they may.
func (r Reach) Refusal(ctx context.Context, c client.Client, who Requester) (string, error) {
	cluster := r.Cluster
	if r.Everywhere {
		cluster = ""
	}
	ok, why, err := MayDeliver(ctx, c, who, cluster)
	if err != nil || !ok {
		return why, err
	}
	if r.Everywhere || r.Cluster != vidrav1alpha1.LocalClusterName || r.ServiceAccount == "" {
		return "", nil
	}
	status, err := review(ctx, c, who, &authorizationv1.ResourceAttributes{
		Resource: "serviceaccounts", Namespace: r.Namespace, Name: r.ServiceAccount, Verb: "impersonate"})
	if err != nil {
		return "", fmt.Errorf("review whether %s may impersonate ServiceAccount %s/%s: %w", who.User, r.Namespace, r.ServiceAccount, err)
	}
	if !status.Allowed {
		return fmt.Sprintf("%s, who last changed it, may not deliver to the hub as ServiceAccount %s/%s: that needs the verb impersonate on that serviceaccount",
			who.User, r.Namespace, r.ServiceAccount), nil
	}
	return "", nil
}

// RequesterRefusal asks whether the requester an object's annotations record may
// deliver where reach says: why not, "" when they may or when none is recorded (the
// operator wrote it, or it was written before the requester policy was installed).
func RequesterRefusal(ctx context.Context, c client.Client, annotations map[string]string, reach Reach) (string, error) {
	who, recorded := RequesterOf(annotations)
	if !recorded {
		return "", nil
	}
	return reach.Refusal(ctx, c, who)
}
