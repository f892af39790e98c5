package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ClusterNameErrors says what is wrong with an enrolled cluster's name, or nothing: a DNS
// label, or labels joined by dots (an inventory's clusters are <namespace>.<name>), at
// most 63 characters, since the name is a label value, a VidraCluster's name and a
// destination's cluster.
func ClusterNameErrors(name string) []string {
	if len(name) > validation.DNS1123LabelMaxLength {
		return []string{fmt.Sprintf("must be no more than %d characters", validation.DNS1123LabelMaxLength)}
	}
	return validation.IsDNS1123Subdomain(name)
}
