package secret

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

func TestLegacyNameIsAValidClusterName(t *testing.T) {
	tests := map[string]string{
		"10.0.0.1":                    "10-0-0-1",
		"API.Edge.example.com":        "api-edge-example-com",
		"edge_1":                      "edge-1",
		"-edge-":                      "edge",
		"":                            "",
		strings.Repeat("a.", 40):      "",
		strings.Repeat("b", 70):       "",
		strings.Repeat("b", 70) + "x": "",
	}
	for host, want := range tests {
		got := legacyName(host)
		if want != "" && got != want {
			t.Errorf("legacyName(%q) = %q, want %q", host, got, want)
		}
		if host != "" && len(validation.IsDNS1123Label(got)) > 0 {
			t.Errorf("legacyName(%q) = %q, not a DNS-1123 label", host, got)
		}
	}
	long1, long2 := legacyName(strings.Repeat("b", 70)), legacyName(strings.Repeat("b", 70)+"x")
	if long1 == long2 {
		t.Errorf("two long hosts share the name %q", long1)
	}
}

func TestClusterLabelWinsOverTheLegacyLabel(t *testing.T) {
	name, reason, _ := clusterName(map[string]string{
		vidrav1alpha1.ClusterLabel:       "edge-1",
		vidrav1alpha1.LegacyClusterLabel: "10.0.0.1",
	})
	if name != "edge-1" || reason != "" {
		t.Errorf("clusterName = %q (%s), want edge-1", name, reason)
	}
	if _, reason, _ := clusterName(map[string]string{vidrav1alpha1.ClusterLabel: "Edge.1"}); reason != vidrav1alpha1.ReasonInvalidClusterName {
		t.Errorf("an invalid name gave reason %q", reason)
	}
}

// RBAC names the hub local: no member may take that name, by either label.
func TestTheHubsNameIsNoMembersName(t *testing.T) {
	for _, labels := range []map[string]string{
		{vidrav1alpha1.ClusterLabel: vidrav1alpha1.LocalClusterName},
		{vidrav1alpha1.LegacyClusterLabel: "LOCAL"},
	} {
		if name, reason, msg := clusterName(labels); reason != vidrav1alpha1.ReasonInvalidClusterName || !strings.Contains(msg, "names the hub itself") {
			t.Errorf("clusterName(%v) = %q, %q, %q; want it refused", labels, name, reason, msg)
		}
	}
}
