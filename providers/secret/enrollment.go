package secret

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/identity"
	"github.com/vidra-operator/vidra/internal/fleet/policy"
)

// enrollment is what a labeled Secret asks for.
type enrollment struct {
	name       string
	labels     map[string]string // labels for the VidraCluster
	kubeconfig []byte
	hash       string // of kubeconfig, to notice rotation
	// policy is the delivery policy its annotations set; policyErr why they do not parse.
	policy    policy.Policy
	policyErr string
	// serviceAccount is the member's ServiceAccount whose token the kubeconfig holds, when
	// enroll created it; saErr says why the annotation naming it does not parse.
	serviceAccount *types.NamespacedName
	saErr          string
	// pull: the cluster's agent fetches its bundles; the Secret holds no credential.
	pull bool
}

// readEnrollment reads the cluster name, the labels to copy and the kubeconfig from a
// Secret. The first return is the reason for a refusal, with a message.
func readEnrollment(s *corev1.Secret) (enrollment, string, string) {
	name, reason, message := clusterName(s.Labels)
	if reason != "" {
		return enrollment{}, reason, message
	}
	if reason, message := inventoryState(s); reason != "" {
		return enrollment{name: name, labels: clusterLabels(s)}, reason, message
	}
	data := s.Data[vidrav1alpha1.KubeconfigKey]
	if s.Annotations[vidrav1alpha1.ModeAnnotation] == vidrav1alpha1.ModePull {
		return readPullEnrollment(s, name, data)
	}
	if len(data) == 0 {
		return enrollment{name: name}, vidrav1alpha1.ReasonMissingKubeconfig,
			fmt.Sprintf("Secret has no data key %q holding a kubeconfig", vidrav1alpha1.KubeconfigKey)
	}
	enr := enrollment{name: name, labels: clusterLabels(s), kubeconfig: data, hash: kubeconfigHash(data)}
	enr.policy, enr.policyErr = parsePolicy(s)
	if v, ok := s.Annotations[vidrav1alpha1.ServiceAccountAnnotation]; ok {
		sa, err := identity.ParseServiceAccount(v)
		if err != nil {
			enr.saErr = fmt.Sprintf("%s: %v", vidrav1alpha1.ServiceAccountAnnotation, err)
		} else {
			enr.serviceAccount = &sa
		}
	}
	return enr, "", ""
}

// inventoryState is why a Secret an inventory wrote enrolls no cluster yet: its cluster
// is not provisioned (Provisioning), its control plane not healthy, or the inventory's
// credentials were refused.
func inventoryState(s *corev1.Secret) (string, string) {
	if s.Labels[vidrav1alpha1.InventoryLabel] == "" {
		return "", ""
	}
	if msg := s.Annotations[vidrav1alpha1.InventoryWaitingAnnotation]; msg != "" {
		return vidrav1alpha1.ReasonProvisioning, msg
	}
	if msg := s.Annotations[vidrav1alpha1.InventoryUnhealthyAnnotation]; msg != "" {
		return vidrav1alpha1.ReasonControlPlaneUnhealthy, msg
	}
	if msg := s.Annotations[vidrav1alpha1.InventoryRefusedAnnotation]; msg != "" {
		return vidrav1alpha1.ReasonInventoryRefused, msg
	}
	return "", ""
}

// readPullEnrollment reads a pull cluster's Secret, which must hold no credential: the
// hub never connects to a pull cluster, and a kubeconfig lying in its Secret would be a
// credential the hub need not hold.
func readPullEnrollment(s *corev1.Secret, name string, kubeconfig []byte) (enrollment, string, string) {
	enr := enrollment{name: name, labels: clusterLabels(s), pull: true}
	if strings.Contains(name, ".") {
		return enr, vidrav1alpha1.ReasonInvalidClusterName, fmt.Sprintf("a pull cluster's name %q names its namespace on the hub: no dots", name)
	}
	if len(kubeconfig) > 0 {
		return enr, vidrav1alpha1.ReasonPullCredentials, fmt.Sprintf("Secret enrolls a pull cluster (%s=%s) and holds a kubeconfig under %q: remove it, the hub holds no credential for a pull cluster",
			vidrav1alpha1.ModeAnnotation, vidrav1alpha1.ModePull, vidrav1alpha1.KubeconfigKey)
	}
	enr.policy, enr.policyErr = parsePolicy(s)
	return enr, "", ""
}

// clusterLabels are the Secret's labels that the VidraCluster gets: all but enrollment's.
func clusterLabels(s *corev1.Secret) map[string]string {
	labels := map[string]string{}
	for k, v := range s.Labels {
		if k != vidrav1alpha1.ClusterLabel && k != vidrav1alpha1.LegacyClusterLabel {
			labels[k] = v
		}
	}
	return labels
}

// parsePolicy reads the delivery policy of the Secret's annotations, or why they do not parse.
func parsePolicy(s *corev1.Secret) (policy.Policy, string) {
	pol, err := policy.Parse(s.Annotations)
	if err != nil {
		return policy.Policy{}, err.Error()
	}
	return pol, ""
}

// clusterName is the cluster name the labels ask for: the value of ClusterLabel, or else a
// name derived from the host in LegacyClusterLabel (see legacyName).
func clusterName(labels map[string]string) (string, string, string) {
	name, reason, message := requestedName(labels)
	if reason == "" && name == vidrav1alpha1.LocalClusterName {
		// RBAC names the hub local: a member of that name would take its deliver rights.
		return "", vidrav1alpha1.ReasonInvalidClusterName, fmt.Sprintf("%q names the hub itself (RBAC's deliver on vidraclusters named %s): choose another cluster name", name, name)
	}
	return name, reason, message
}

// requestedName is the name the labels ask for, before names reserved for the hub.
func requestedName(labels map[string]string) (string, string, string) {
	if name, ok := labels[vidrav1alpha1.ClusterLabel]; ok {
		if errs := vidrav1alpha1.ClusterNameErrors(name); len(errs) > 0 {
			return "", vidrav1alpha1.ReasonInvalidClusterName,
				fmt.Sprintf("label %s=%q is not a valid cluster name: %s", vidrav1alpha1.ClusterLabel, name, strings.Join(errs, "; "))
		}
		return name, "", ""
	}
	host := labels[vidrav1alpha1.LegacyClusterLabel]
	name := legacyName(host)
	if name == "" {
		return "", vidrav1alpha1.ReasonInvalidClusterName,
			fmt.Sprintf("label %s=%q yields no cluster name", vidrav1alpha1.LegacyClusterLabel, host)
	}
	return name, "", ""
}

var notNameChars = regexp.MustCompile(`[^a-z0-9]+`)

// legacyName derives a cluster name from the host of the original Vidra's label: lower
// case, every run of characters other than letters and digits becomes one '-', and leading
// or trailing '-' go. A name longer than 63 characters keeps 54 of them and gets '-' and
// 8 hex digits of the host's SHA-256, so it stays unique. 10.0.0.1 → 10-0-0-1,
// API.Edge.example.com → api-edge-example-com.
func legacyName(host string) string {
	name := strings.Trim(notNameChars.ReplaceAllString(strings.ToLower(host), "-"), "-")
	if len(name) > validation.DNS1123LabelMaxLength {
		sum := sha256.Sum256([]byte(host))
		name = strings.TrimRight(name[:54], "-") + "-" + hex.EncodeToString(sum[:])[:8]
	}
	return name
}

// cacheNamespaces are the namespaces an enrolled cluster's cache watches: those of its
// delivery policy, or all (nil).
func cacheNamespaces(enr enrollment) []string {
	if len(enr.policy.AllowedNamespaces) == 0 {
		return nil
	}
	return enr.policy.AllowedNamespaces
}
