package clusterinfo

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The API versions are what Helm's capabilities list: each group version and each kind
// in it, never a subresource, sorted.
func TestAPIVersionsListGroupVersionsAndKinds(t *testing.T) {
	got := apiVersions([]*metav1.APIResourceList{
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments", Kind: "Deployment"}, {Name: "deployments/scale", Kind: "Scale"}}},
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "configmaps", Kind: "ConfigMap"}}},
		{GroupVersion: "example.vidra.dev/v1"},
	})
	want := []string{"apps/v1", "apps/v1/Deployment", "example.vidra.dev/v1", "v1", "v1/ConfigMap"}
	if !slices.Equal(got, want) {
		t.Errorf("apiVersions = %q, want %q", got, want)
	}
}
