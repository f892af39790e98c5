// Package inventory enrolls the clusters of inventories a team already keeps (Cluster
// API's Clusters and kubeconfig Secrets) as kubectl vidra enroll would: the inventory's
// admin credentials are used once, to create the scoped identity on the cluster, and the
// hub keeps only that identity's short-lived token, in an enrollment Secret the cluster
// provider engages as any other. The Secret goes when the inventory object does.
package inventory

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/identity"
	"github.com/vidra-operator/vidra/internal/fleet/kubeconfig"
)

// Enroller writes the enrollment Secrets of an inventory's clusters in the operator's
// namespace.
type Enroller struct {
	// Hub writes the enrollment Secrets, in Namespace, and Reader reads them: uncached,
	// so that no cache of every Secret of the hub is started.
	Hub       client.Client
	Reader    client.Reader
	Namespace string
	// Policy is the kubeconfig policy every enrollment meets (no exec, no files, no
	// insecure TLS unless the admin allowed them).
	Policy kubeconfig.Policy
	// Scheme of the clients of the clusters.
	Scheme *runtime.Scheme
	// TokenTTL is the lifetime of the identity's tokens (an hour), which the cluster
	// provider renews.
	TokenTTL time.Duration
}

// Cluster is a cluster of an inventory.
type Cluster struct {
	// Inventory names the inventory (cluster-api); Source its object there.
	Inventory string
	Source    types.NamespacedName
	// Labels are the inventory object's, for the VidraCluster (and clusterSelector).
	Labels map[string]string
	// Namespaces narrow the identity to those namespaces; nil: any object.
	Namespaces []string
	// name, when set, is the cluster's name in the fleet in place of the source's.
	name string
}

// Name is the cluster's name in the fleet: <namespace>.<name> of its inventory object,
// unless the inventory names it otherwise (an Argo CD cluster's name).
func (c Cluster) Name() string {
	if c.name != "" {
		return c.name
	}
	return c.Source.Namespace + "." + c.Source.Name
}

// secretLabels are the enrollment Secret's labels: the inventory object's (but Vidra's
// own and those a label value cannot hold), the cluster's name and the inventory.
func (c Cluster) secretLabels() map[string]string {
	out := map[string]string{}
	for k, v := range c.Labels {
		if strings.Contains(k, vidrav1alpha1.GroupVersion.Group+"/") {
			continue // Vidra's own: the inventory sets them
		}
		if len(validation.IsQualifiedName(k)) == 0 && len(validation.IsValidLabelValue(v)) == 0 {
			out[k] = v
		}
	}
	out[vidrav1alpha1.ClusterLabel] = c.Name()
	out[vidrav1alpha1.InventoryLabel] = c.Inventory
	return out
}

// Waiting shows the cluster as not enrolled yet, and why (it is not provisioned, or its
// identity could not be created yet); a Secret that held its credentials keeps them
// until it is enrolled again.
func (e *Enroller) Waiting(ctx context.Context, c Cluster, why string) error {
	return e.write(ctx, c, func(s *corev1.Secret) {
		s.Annotations[vidrav1alpha1.InventoryWaitingAnnotation] = why
		delete(s.Annotations, vidrav1alpha1.InventoryRefusedAnnotation)
		delete(s.Annotations, vidrav1alpha1.InventoryUnhealthyAnnotation)
	})
}

// unhealthy shows the cluster as not engaged while its inventory says its control plane
// is not healthy, and why; its identity is kept for when it is again.
func (e *Enroller) unhealthy(ctx context.Context, c Cluster, why string) error {
	return e.write(ctx, c, func(s *corev1.Secret) {
		s.Annotations[vidrav1alpha1.InventoryUnhealthyAnnotation] = why
		delete(s.Annotations, vidrav1alpha1.InventoryRefusedAnnotation)
		delete(s.Annotations, vidrav1alpha1.InventoryWaitingAnnotation)
	})
}

// refuse shows the cluster as refused, and why: its credentials break the policy.
func (e *Enroller) refuse(ctx context.Context, c Cluster, why string) error {
	return e.write(ctx, c, func(s *corev1.Secret) {
		s.Annotations[vidrav1alpha1.InventoryRefusedAnnotation] = why
		delete(s.Annotations, vidrav1alpha1.InventoryWaitingAnnotation)
		delete(s.Annotations, vidrav1alpha1.InventoryUnhealthyAnnotation)
		delete(s.Data, vidrav1alpha1.KubeconfigKey)
	})
}

// Enroll enrolls the cluster admin reaches (the inventory's kubeconfig): unless the
// Secret holds an identity made with the same credentials and scope already, the
// identity is created on the cluster, a token requested for it, and the Secret written
// with that token alone. A kubeconfig the policy refuses is shown as refused, not retried.
func (e *Enroller) Enroll(ctx context.Context, c Cluster, admin []byte) error {
	digest := credentialsDigest(admin, c.Namespaces)
	current, err := e.get(ctx, c)
	if err != nil {
		return err
	}
	if current != nil && current.Annotations[vidrav1alpha1.InventoryCredentialsAnnotation] == digest &&
		len(current.Data[vidrav1alpha1.KubeconfigKey]) > 0 && current.Annotations[vidrav1alpha1.InventoryWaitingAnnotation] == "" {
		return e.write(ctx, c, func(s *corev1.Secret) { delete(s.Annotations, vidrav1alpha1.InventoryUnhealthyAnnotation) })
	}
	cfg, err := kubeconfig.Load(admin, e.Policy)
	if err != nil {
		return e.refuse(ctx, c, fmt.Sprintf("%s kubeconfig of %s: %v", c.Inventory, c.Source, err))
	}
	raw, err := clientcmd.Load(admin)
	if err != nil {
		return e.refuse(ctx, c, fmt.Sprintf("%s kubeconfig of %s does not parse", c.Inventory, c.Source))
	}
	member, err := client.New(cfg.REST, client.Options{Scheme: e.Scheme})
	if err != nil {
		return e.refuse(ctx, c, fmt.Sprintf("%s kubeconfig of %s: %v", c.Inventory, c.Source, err))
	}
	spec := identity.Spec{ServiceAccount: identity.DefaultServiceAccount, Namespaces: c.Namespaces}
	token, err := createIdentity(ctx, member, spec, e.TokenTTL)
	if err != nil {
		if werr := e.Waiting(ctx, c, fmt.Sprintf("creating its identity on the cluster (retried): %v", err)); werr != nil {
			return werr
		}
		return err
	}
	cluster := raw.Clusters[raw.Contexts[raw.CurrentContext].Cluster]
	enrolled, err := identity.EnrollmentSecret(c.Name(), e.Namespace, nil, spec, cluster, token)
	if err != nil {
		return err
	}
	return e.write(ctx, c, func(s *corev1.Secret) {
		for _, k := range []string{vidrav1alpha1.InventoryWaitingAnnotation, vidrav1alpha1.InventoryRefusedAnnotation, vidrav1alpha1.InventoryUnhealthyAnnotation,
			vidrav1alpha1.AllowedNamespacesAnnotation, vidrav1alpha1.AllowedClusterKindsAnnotation, identity.PolicyFromEnrollAnnotation} {
			delete(s.Annotations, k)
		}
		maps.Copy(s.Annotations, enrolled.Annotations)
		s.Annotations[vidrav1alpha1.InventoryCredentialsAnnotation] = digest
		s.Data = enrolled.Data
	})
}

// createIdentity creates the identity on the cluster and returns a token of it.
func createIdentity(ctx context.Context, member client.Client, spec identity.Spec, ttl time.Duration) (string, error) {
	if _, err := identity.Apply(ctx, member, spec, false); err != nil {
		return "", err
	}
	token, err := identity.RequestToken(ctx, member, spec.ServiceAccount, max(cmp.Or(ttl, time.Hour), identity.MinTokenTTL))
	if err != nil {
		return "", err
	}
	return token.Value, nil
}

// credentialsDigest tells when an identity must be created again: other credentials (a
// new control plane), or another scope.
func credentialsDigest(admin []byte, namespaces []string) string {
	sum := sha256.Sum256(append(append([]byte{}, admin...), []byte("\x00"+strings.Join(namespaces, ","))...))
	return hex.EncodeToString(sum[:16])
}

// Remove deletes the enrollment Secrets the inventory wrote for its object source, but
// the one named keep: the cluster provider then lets their clusters go. written reads the
// inventory's enrollment Secrets (its cache: one it misses now brings its object back).
func (e *Enroller) Remove(ctx context.Context, written client.Reader, inventory string, source types.NamespacedName, keep string) error {
	var list corev1.SecretList
	if err := written.List(ctx, &list, client.InNamespace(e.Namespace), client.MatchingLabels{vidrav1alpha1.InventoryLabel: inventory}); err != nil {
		return fmt.Errorf("list the enrollment Secrets of the %s inventory: %w", inventory, err)
	}
	for i := range list.Items {
		s := &list.Items[i]
		if s.Name == keep || s.Annotations[vidrav1alpha1.InventorySourceAnnotation] != source.String() {
			continue
		}
		if err := e.Hub.Delete(ctx, s, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete enrollment Secret %s/%s of %s: %w", e.Namespace, s.Name, source, err)
		}
	}
	return nil
}

// get is the cluster's enrollment Secret, nil when there is none; an error when one of
// that name exists that the inventory did not write for this object.
func (e *Enroller) get(ctx context.Context, c Cluster) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := e.Reader.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: c.Name()}, s)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read enrollment Secret %s/%s: %w", e.Namespace, c.Name(), err)
	case s.Labels[vidrav1alpha1.InventoryLabel] != c.Inventory || s.Annotations[vidrav1alpha1.InventorySourceAnnotation] != c.Source.String():
		return nil, fmt.Errorf("enrollment Secret %s/%s exists and was not written by the %s inventory for %s: leave the name to it, or delete that Secret",
			e.Namespace, c.Name(), c.Inventory, c.Source)
	}
	return s, nil
}

// write creates or updates the cluster's enrollment Secret: its labels follow the
// inventory object's, and change edits the rest.
func (e *Enroller) write(ctx context.Context, c Cluster, change func(*corev1.Secret)) error {
	current, err := e.get(ctx, c)
	if err != nil {
		return err
	}
	s := current.DeepCopy()
	if s == nil {
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: c.Name(), Namespace: e.Namespace}, Type: corev1.SecretTypeOpaque}
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Labels = c.secretLabels()
	s.Annotations[vidrav1alpha1.InventorySourceAnnotation] = c.Source.String()
	change(s)
	switch {
	case current == nil:
		err = e.Hub.Create(ctx, s)
	case equalSecrets(current, s):
		return nil
	default:
		err = e.Hub.Update(ctx, s)
	}
	if err != nil {
		return fmt.Errorf("write enrollment Secret %s/%s of %s: %w", e.Namespace, c.Name(), c.Source, err)
	}
	return nil
}

// equalSecrets: an update would change nothing.
func equalSecrets(a, b *corev1.Secret) bool {
	return maps.Equal(a.Labels, b.Labels) && maps.Equal(a.Annotations, b.Annotations) &&
		maps.EqualFunc(a.Data, b.Data, func(x, y []byte) bool { return string(x) == string(y) })
}
