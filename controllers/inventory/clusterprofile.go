package inventory

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/credentials"
)

// ClusterProfileInventory is the name of SIG Multicluster's inventory (KEP-4322):
// ClusterProfiles, with credentials from access providers (KEP-5339).
const ClusterProfileInventory = "cluster-profile"

// ClusterProfileGroupKind is the ClusterProfile; its served version is found at start.
var ClusterProfileGroupKind = schema.GroupKind{Group: "multicluster.x-k8s.io", Kind: "ClusterProfile"}

// The one access provider Vidra implements, in process, never as a program: KEP-5339's
// secretreader, whose token for profile P is the key token of the Secret P in the
// consumer's namespace (the operator's).
const (
	SecretReaderProvider = "secretreader"
	secretReaderTokenKey = "token"
)

// controlPlaneHealthy is KEP-4322's condition on a profile's control plane.
const controlPlaneHealthy = "ControlPlaneHealthy"

// ClusterProfile enrolls the clusters of the ClusterProfiles of the namespaces its cache
// reads.
type ClusterProfile struct {
	// Profiles reads ClusterProfiles (of GVK), in the listed namespaces only, and the
	// enrollment Secrets this inventory wrote.
	Profiles client.Reader
	GVK      schema.GroupVersionKind
	// Secrets reads the secretreader's Secrets in the Enroller's namespace, uncached:
	// the namespace holds the content store too, which no cache of Vidra's keeps.
	Secrets  client.Reader
	Enroller *Enroller
}

// Reconcile enrolls one ClusterProfile's cluster through the secretreader provider's
// endpoint and token, shows it Pending while its control plane is not healthy or its
// token not written yet, and lets it go when the profile goes.
func (r *ClusterProfile) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(r.GVK)
	err := r.Profiles.Get(ctx, req.NamespacedName, obj)
	if apierrors.IsNotFound(err) || (err == nil && obj.GetLabels()[ClusterManagerLabel] == ClusterManagerName) {
		// Gone, or one Vidra published of a cluster it enrolled otherwise.
		return reconcile.Result{}, r.Enroller.Remove(ctx, r.Profiles, ClusterProfileInventory, req.NamespacedName, "")
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("read ClusterProfile %s: %w", req.NamespacedName, err)
	}
	c := Cluster{Inventory: ClusterProfileInventory, Source: req.NamespacedName, Labels: obj.GetLabels()}
	if c.Namespaces, err = identityNamespaces(obj.GetAnnotations()); err != nil {
		return reconcile.Result{}, r.Enroller.refuse(ctx, c, fmt.Sprintf("ClusterProfile %s: %v", req.NamespacedName, err))
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return reconcile.Result{}, r.Enroller.Waiting(ctx, c, fmt.Sprintf("ClusterProfile %s is being deleted", req.NamespacedName))
	}
	if why := unhealthy(obj); why != "" {
		return reconcile.Result{}, r.Enroller.unhealthy(ctx, c, fmt.Sprintf("ClusterProfile %s: %s", req.NamespacedName, why))
	}
	cluster, err := accessCluster(obj)
	if err != nil {
		return reconcile.Result{RequeueAfter: waitProvisioning}, r.Enroller.Waiting(ctx, c, fmt.Sprintf("ClusterProfile %s: %v", req.NamespacedName, err))
	}
	key := types.NamespacedName{Namespace: r.Enroller.Namespace, Name: req.Name}
	secret := &corev1.Secret{}
	err = r.Secrets.Get(ctx, key, secret)
	if apierrors.IsNotFound(err) {
		// Not watched (the namespace holds every Secret of the content store): looked
		// for again.
		why := fmt.Sprintf("ClusterProfile %s: the %s access provider's Secret %s is not written yet", req.NamespacedName, SecretReaderProvider, key)
		return reconcile.Result{RequeueAfter: waitProvisioning}, r.Enroller.Waiting(ctx, c, why)
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("read the %s Secret %s of ClusterProfile %s: %w", SecretReaderProvider, key, req.NamespacedName, err)
	}
	token := strings.TrimSpace(string(secret.Data[secretReaderTokenKey]))
	if token == "" {
		why := fmt.Sprintf("ClusterProfile %s: Secret %s has no key %q holding its token", req.NamespacedName, key, secretReaderTokenKey)
		return reconcile.Result{RequeueAfter: waitProvisioning}, r.Enroller.Waiting(ctx, c, why)
	}
	// Whoever writes a profile's status names the server the token goes to, and the
	// profile's name picks the Secret: the Secret must say where it may be sent.
	if allowed := credentials.AllowedURLs(secret.Annotations); !credentials.Covers(allowed, cluster.Server) {
		// Looked at again: a Secret annotated anew is not watched.
		return reconcile.Result{RequeueAfter: waitProvisioning}, r.Enroller.refuse(ctx, c, fmt.Sprintf("ClusterProfile %s: Secret %s may be sent only to the URLs its annotation %s lists (%s), not to %s",
			req.NamespacedName, key, vidrav1alpha1.AllowedURLsAnnotation, orNone(allowed), cluster.Server))
	}
	admin, err := profileKubeconfig(c.Name(), cluster, token)
	if err != nil {
		return reconcile.Result{}, r.Enroller.refuse(ctx, c, fmt.Sprintf("ClusterProfile %s: %v", req.NamespacedName, err))
	}
	return reconcile.Result{}, r.Enroller.Enroll(ctx, c, admin)
}

// unhealthy says why a profile's control plane is not healthy, by its ControlPlaneHealthy
// condition; "" when it is, or the profile does not say.
func unhealthy(obj *unstructured.Unstructured) string {
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, item := range conditions {
		cond, _ := item.(map[string]any)
		if cond["type"] != controlPlaneHealthy || cond["status"] != "False" {
			continue
		}
		return fmt.Sprintf("its control plane is not healthy (%s False, %v: %v)", controlPlaneHealthy, cond["reason"], cond["message"])
	}
	return ""
}

// accessProvider is an entry of a profile's status.accessProviders (or of the deprecated
// credentialProviders, which it takes the place of).
type accessProvider struct {
	Name    string              `json:"name"`
	Cluster clientcmdv1.Cluster `json:"cluster"`
}

// accessCluster is the secretreader provider's entry of the profile: the cluster's
// endpoint, CA and TLS server name.
func accessCluster(obj *unstructured.Unstructured) (clientcmdv1.Cluster, error) {
	var status struct {
		AccessProviders     []accessProvider `json:"accessProviders"`
		CredentialProviders []accessProvider `json:"credentialProviders"`
	}
	raw, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "status")
	if data, err := json.Marshal(raw); err != nil || json.Unmarshal(data, &status) != nil {
		return clientcmdv1.Cluster{}, fmt.Errorf("status.accessProviders does not parse")
	}
	var names []string
	for _, list := range [][]accessProvider{status.AccessProviders, status.CredentialProviders} {
		for _, p := range list {
			if p.Name == SecretReaderProvider {
				return p.Cluster, nil
			}
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return clientcmdv1.Cluster{}, fmt.Errorf("status.accessProviders lists no %s provider (it lists %s); it is enrolled once it does",
		SecretReaderProvider, orNone(slices.Compact(names)))
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// profileKubeconfig is a kubeconfig of the profile's cluster with the secretreader's
// token: what the profile says of the cluster is kept, for the kubeconfig policy to judge
// (a CA file, insecure TLS, a proxy).
func profileKubeconfig(name string, cluster clientcmdv1.Cluster, token string) ([]byte, error) {
	if cluster.Server == "" {
		return nil, fmt.Errorf("the %s provider's cluster names no server", SecretReaderProvider)
	}
	cfg := clientcmdapi.NewConfig()
	// Its extensions are left out: they configure exec plugins, which Vidra never runs.
	cfg.Clusters[name] = &clientcmdapi.Cluster{
		Server: cluster.Server, TLSServerName: cluster.TLSServerName, InsecureSkipTLSVerify: cluster.InsecureSkipTLSVerify,
		CertificateAuthority: cluster.CertificateAuthority, CertificateAuthorityData: cluster.CertificateAuthorityData,
		ProxyURL: cluster.ProxyURL, DisableCompression: cluster.DisableCompression,
	}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	return clientcmd.Write(*cfg)
}
