package secret

import "k8s.io/apimachinery/pkg/types"

// Enrolls reports whether the provider still tracks the Secret, so tests can wait for a
// retired Secret to be forgotten before reusing its cluster's server.
func (p *Provider) Enrolls(key types.NamespacedName) bool {
	return p.hasClaim(key)
}
