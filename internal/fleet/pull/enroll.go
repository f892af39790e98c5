package pull

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/config/crd"
	"github.com/vidra-operator/vidra/internal/fleet/identity"
)

// InstalledByEnrollLabel marks the CRDs enrollment installed on a member, which
// unenrolling removes once nothing uses them.
const InstalledByEnrollLabel = "vidra.infrahub.operators.com/installed-by-enroll"

// Enrollment is what enrolling a pull cluster makes, on both sides.
type Enrollment struct {
	// Cluster is the cluster's name on the hub; Labels the enrollment Secret's labels
	// (the enrollment label included), in SecretNamespace.
	Cluster         string
	Labels          map[string]string
	SecretNamespace string
	// AgentNamespace is the agent's namespace on the member.
	AgentNamespace string
	// Delivery is the identity the agent applies as on the member.
	Delivery identity.Spec
	// Hub is the hub as the agent reaches it (address, TLS server name, CA), and TokenTTL
	// the lifetime of the agent's tokens there.
	Hub      *clientcmdapi.Cluster
	TokenTTL time.Duration
	// AgentImage, when set, runs the agent in a Deployment of this image.
	AgentImage string
	// Operator is the hub operator's ServiceAccount, which may write the cluster's
	// namespace on the hub.
	Operator types.NamespacedName
}

// EnrollmentSecret is the enrollment Secret of a pull cluster on the hub: the cluster's
// name, labels and delivery policy, and no credential.
func (e Enrollment) EnrollmentSecret() *corev1.Secret {
	annotations := map[string]string{vidrav1alpha1.ModeAnnotation: vidrav1alpha1.ModePull}
	if e.Delivery.Scoped() {
		annotations[vidrav1alpha1.AllowedNamespacesAnnotation] = strings.Join(e.Delivery.Namespaces, ",")
		annotations[vidrav1alpha1.AllowedClusterKindsAnnotation] = strings.Join(e.Delivery.ClusterKindNames(), ",")
		annotations[identity.PolicyFromEnrollAnnotation] = "true"
	}
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: e.Cluster, Namespace: e.SecretNamespace, Labels: e.Labels, Annotations: annotations},
		Type:       corev1.SecretTypeOpaque,
	}
}

// Enroll makes everything of a pull cluster but its enrollment Secret, which the caller
// writes once it returns (kubectl vidra enroll checks first what it would replace). On
// the hub: the cluster's namespace, its agent's ServiceAccount, RBAC and heartbeat Lease,
// and a token of that ServiceAccount. On the member: the identity the agent applies as,
// Vidra's CRDs, the agent's ServiceAccount and RBAC, the Secret vidra-agent-hub with the
// hub's address, CA and the token, and, with an image, the agent's Deployment. hub and
// member are the enrolling user's clients; it returns what it did, one line each.
func Enroll(ctx context.Context, hub, member client.Client, e Enrollment) ([]string, error) {
	var done []string
	report := func(where string, lines []string) {
		for _, l := range lines {
			done = append(done, l+" (on the "+where+")")
		}
	}
	// A namespace of that name made by someone else would hold the agent's identity
	// where its maker may act as the agent: it is refused, not taken over.
	ns := &corev1.Namespace{}
	switch err := hub.Get(ctx, client.ObjectKey{Name: Namespace(e.Cluster)}, ns); {
	case err == nil && ns.Labels[ClusterLabel] != e.Cluster:
		return done, fmt.Errorf("namespace %s exists on the hub and is not cluster %s's (no label %s=%s): remove it, or choose another cluster name", ns.Name, e.Cluster, ClusterLabel, e.Cluster)
	case err != nil && !apierrors.IsNotFound(err):
		return done, fmt.Errorf("look up namespace %s on the hub: %w", Namespace(e.Cluster), err)
	}
	lines, err := identity.ApplyObjects(ctx, hub, HubObjects(e.Cluster, e.Operator), false)
	report("hub", lines)
	if err != nil {
		return done, fmt.Errorf("create the agent's identity on the hub: %w", err)
	}
	sa := types.NamespacedName{Namespace: Namespace(e.Cluster), Name: AgentName}
	token, err := identity.RequestToken(ctx, hub, sa, e.TokenTTL)
	if err != nil {
		return done, err
	}
	hubKubeconfig, err := identity.Kubeconfig("hub", e.Hub, token.Value)
	if err != nil {
		return done, err
	}
	done = append(done, fmt.Sprintf("token of serviceaccount %s requested, expires %s (on the hub)", sa, token.ExpiresAt.UTC().Format(time.RFC3339)))
	lines, err = identity.Apply(ctx, member, e.Delivery, false)
	report("member", lines)
	if err != nil {
		return done, fmt.Errorf("create the delivery identity: %w", err)
	}
	lines, err = InstallCRDs(ctx, member)
	report("member", lines)
	if err != nil {
		return done, fmt.Errorf("install Vidra's CRDs: %w", err)
	}
	agent := Agent{Namespace: e.AgentNamespace, Delivery: e.Delivery}
	objs := append(agent.Objects(), e.agentSecret(hubKubeconfig))
	if e.AgentImage != "" {
		objs = append(objs, agent.Deployment(e.AgentImage))
	}
	lines, err = identity.ApplyObjects(ctx, member, objs, false)
	report("member", lines)
	if err != nil {
		return done, fmt.Errorf("install the agent: %w", err)
	}
	return done, nil
}

// agentSecret is the agent's way to its hub, on the member. Its annotations are the
// member's own delivery policy, which the agent enforces whatever the hub sends.
func (e Enrollment) agentSecret(hubKubeconfig []byte) *corev1.Secret {
	annotations := map[string]string{}
	if e.Delivery.Scoped() {
		annotations[vidrav1alpha1.AllowedNamespacesAnnotation] = strings.Join(e.Delivery.Namespaces, ",")
		annotations[vidrav1alpha1.AllowedClusterKindsAnnotation] = strings.Join(e.Delivery.ClusterKindNames(), ",")
	}
	data := map[string][]byte{
		vidrav1alpha1.AgentSecretKubeconfigKey: hubKubeconfig,
		vidrav1alpha1.AgentSecretClusterKey:    []byte(e.Cluster),
		DeliveryAccountKey:                     []byte(e.Delivery.ServiceAccount.String()),
	}
	if e.Delivery.Scoped() {
		data[NamespacesKey] = []byte(strings.Join(e.Delivery.Namespaces, ","))
	}
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: vidrav1alpha1.AgentSecretName, Namespace: e.AgentNamespace, Annotations: annotations,
			Labels: map[string]string{AgentLabel: e.AgentNamespace + "." + AgentName}},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
}

// Deployment runs the agent on the member, as the chart's mode: agent does.
func (a Agent) Deployment(image string) *appsv1.Deployment {
	sa := a.ServiceAccount()
	labels := map[string]string{"app.kubernetes.io/name": "vidra-agent", AgentLabel: sa.Namespace + "." + sa.Name}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: AgentName, Namespace: sa.Namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "vidra-agent"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: sa.Name,
					SecurityContext:    &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{
						Name: "agent", Image: image,
						Args: []string{"--mode=agent", "--agent-namespace=" + sa.Namespace, "--leader-elect", "--leader-election-namespace=" + sa.Namespace},
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
					}},
				},
			},
		},
	}
}

// InstallCRDs applies Vidra's CRDs and waits until the cluster serves them.
func InstallCRDs(ctx context.Context, c client.Client) ([]string, error) {
	files, err := fs.Glob(crd.Bases, "bases/*.yaml")
	if err != nil {
		return nil, err
	}
	var objs []client.Object
	for _, f := range files {
		data, err := crd.Bases.ReadFile(f)
		if err != nil {
			return nil, err
		}
		def := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, def); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		def.TypeMeta = metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}
		def.Labels = map[string]string{InstalledByEnrollLabel: "true"}
		objs = append(objs, def)
	}
	done, err := identity.ApplyObjects(ctx, c, objs, false)
	if err != nil {
		return done, err
	}
	for _, obj := range objs {
		if err := waitEstablished(ctx, c, obj.GetName()); err != nil {
			return done, err
		}
	}
	return done, nil
}

func waitEstablished(ctx context.Context, c client.Client, name string) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		def := &apiextensionsv1.CustomResourceDefinition{}
		if last = c.Get(ctx, client.ObjectKey{Name: name}, def); last != nil {
			return false, nil
		}
		for _, cond := range def.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		last = errors.New("not established yet")
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s: %w (last: %w)", name, err, last)
	}
	return nil
}
