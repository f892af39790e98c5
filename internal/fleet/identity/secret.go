package identity

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// EnrollmentSecret is the enrollment Secret of an identity: its kubeconfig holds the
// ServiceAccount's token only, and its annotations name the identity and set the delivery
// policy to what the identity may do, so a bundle outside it is refused on the hub before
// the member's RBAC refuses it.
func EnrollmentSecret(name, namespace string, labels map[string]string, spec Spec, cluster *clientcmdapi.Cluster, token string) (*corev1.Secret, error) {
	data, err := Kubeconfig(name, cluster, token)
	if err != nil {
		return nil, err
	}
	annotations := map[string]string{vidrav1alpha1.ServiceAccountAnnotation: spec.ServiceAccount.String()}
	if spec.Scoped() {
		annotations[vidrav1alpha1.AllowedNamespacesAnnotation] = strings.Join(spec.Namespaces, ",")
		annotations[vidrav1alpha1.AllowedClusterKindsAnnotation] = strings.Join(spec.ClusterKindNames(), ",")
		annotations[PolicyFromEnrollAnnotation] = "true"
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels, Annotations: annotations},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{vidrav1alpha1.KubeconfigKey: data},
	}, nil
}
