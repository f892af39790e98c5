package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// createCluster writes a VidraCluster and its status on the hub, as the cluster provider
// does, and deletes it when the test ends.
func createCluster(t *testing.T, name string, status vidrav1alpha1.VidraClusterStatus) {
	t.Helper()
	ctx := context.Background()
	hub := fleet.Hub.Client
	vc := &vidrav1alpha1.VidraCluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := hub.Create(ctx, vc); err != nil {
		t.Fatalf("create VidraCluster %s: %v", name, err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), vc) })
	vc.Status = status
	if err := hub.Status().Update(ctx, vc); err != nil {
		t.Fatalf("status of VidraCluster %s: %v", name, err)
	}
}

func ago(d time.Duration) *metav1.Time {
	t := metav1.NewTime(time.Now().Add(-d))
	return &t
}

func readyCondition(status metav1.ConditionStatus, reason, message string) []metav1.Condition {
	return []metav1.Condition{{
		Type: vidrav1alpha1.ConditionReady, Status: status, Reason: reason, Message: message,
		LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Minute)),
	}}
}

func TestClustersShowsEachClustersPhaseServerVersionProbeAndReason(t *testing.T) {
	createCluster(t, "edge-paris", vidrav1alpha1.VidraClusterStatus{
		Phase: vidrav1alpha1.ClusterEngaged, Server: "https://10.0.0.1:6443", KubernetesVersion: "v1.36.0",
		LastProbeTime: ago(12 * time.Second), Message: "engaged; the API server answers its probes",
		Conditions: readyCondition(metav1.ConditionTrue, "Engaged", "engaged; the API server answers its probes"),
		SecretRef:  &vidrav1alpha1.SecretReference{Namespace: "vidra-system", Name: "edge-paris"},
	})
	createCluster(t, "edge-lyon", vidrav1alpha1.VidraClusterStatus{
		Phase: vidrav1alpha1.ClusterUnreachable, Server: "https://10.0.0.2:6443", KubernetesVersion: "v1.35.2",
		LastProbeTime: ago(30 * time.Minute),
		Message:       "engaged, but 3 probes in a row failed; last: context deadline exceeded",
		Conditions:    readyCondition(metav1.ConditionFalse, "Unreachable", "engaged, but 3 probes in a row failed; last: context deadline exceeded"),
	})
	// A rejected cluster whose status has no message of its own: the Ready condition says why.
	createCluster(t, "edge-nice", vidrav1alpha1.VidraClusterStatus{
		Phase: vidrav1alpha1.ClusterRejected,
		Conditions: readyCondition(metav1.ConditionFalse, "ExecPluginNotAllowed",
			`kubeconfig rejected (ExecPluginNotAllowed): user "admin" runs exec plugin "aws"`),
	})

	out, stderr, err := runPlugin(t, "clusters", "--kubeconfig", hubKubeconfig(t))
	if err != nil {
		t.Fatalf("clusters: %v\n%s", err, stderr)
	}
	tb := parseTable(t, out, "NAME", "PHASE", "MODE", "SERVER", "VERSION", "SINCE", "REASON")
	tb.expectRow(t, "edge-paris", map[string]string{
		"PHASE": "Engaged", "SERVER": "https://10.0.0.1:6443", "VERSION": "v1.36.0",
		"REASON": "engaged; the API server answers its probes",
	})
	// Seconds tick on while the test runs.
	if probe := tb.row(t, "edge-paris")["SINCE"]; !regexp.MustCompile(`^[1-5][0-9]s$`).MatchString(probe) {
		t.Errorf("edge-paris SINCE %q, want about 12s", probe)
	}
	tb.expectRow(t, "edge-lyon", map[string]string{
		"PHASE": "Unreachable", "SERVER": "https://10.0.0.2:6443", "VERSION": "v1.35.2", "SINCE": "30m",
		"REASON": "engaged, but 3 probes in a row failed; last: context deadline exceeded",
	})
	tb.expectRow(t, "edge-nice", map[string]string{
		"PHASE": "Rejected", "SERVER": "<none>", "VERSION": "<none>", "SINCE": "<never>",
		"REASON": `kubeconfig rejected (ExecPluginNotAllowed): user "admin" runs exec plugin "aws"`,
	})

	out, stderr, err = runPlugin(t, "clusters", "--kubeconfig", hubKubeconfig(t), "-o", "wide")
	if err != nil {
		t.Fatalf("clusters -o wide: %v\n%s", err, stderr)
	}
	wide := parseTable(t, out, "NAME", "PHASE", "MODE", "SERVER", "VERSION", "SINCE", "AGE", "SECRET", "REASON")
	wide.expectRow(t, "edge-paris", map[string]string{"SECRET": "vidra-system/edge-paris", "PHASE": "Engaged"})
	wide.expectRow(t, "edge-nice", map[string]string{"SECRET": "<none>"})
}

func TestClustersPrintsTheVidraClustersAsYAMLOrJSON(t *testing.T) {
	createCluster(t, "edge-oslo", vidrav1alpha1.VidraClusterStatus{
		Phase: vidrav1alpha1.ClusterEngaged, Server: "https://10.0.0.3:6443", KubernetesVersion: "v1.36.0",
		LastProbeTime: ago(time.Second),
	})
	for _, format := range []string{"yaml", "json"} {
		out, stderr, err := runPlugin(t, "clusters", "--kubeconfig", hubKubeconfig(t), "-o", format)
		if err != nil {
			t.Fatalf("clusters -o %s: %v\n%s", format, err, stderr)
		}
		var list struct {
			APIVersion string                       `json:"apiVersion"`
			Kind       string                       `json:"kind"`
			Items      []vidrav1alpha1.VidraCluster `json:"items"`
		}
		if format == "json" {
			err = json.Unmarshal([]byte(out), &list)
		} else {
			err = yaml.Unmarshal([]byte(out), &list)
		}
		if err != nil {
			t.Fatalf("-o %s does not parse: %v\n%s", format, err, out)
		}
		if list.APIVersion != "v1" || list.Kind != "List" {
			t.Errorf("-o %s: got %s %s, want a v1 List", format, list.APIVersion, list.Kind)
		}
		found := false
		for _, vc := range list.Items {
			if vc.Name != "edge-oslo" {
				continue
			}
			found = true
			if vc.APIVersion != "infrahub.operators.com/v1alpha1" || vc.Kind != "VidraCluster" {
				t.Errorf("-o %s: item typed %s %s", format, vc.APIVersion, vc.Kind)
			}
			if vc.Status.Server != "https://10.0.0.3:6443" || len(vc.ManagedFields) != 0 {
				t.Errorf("-o %s: item %+v", format, vc.ObjectMeta)
			}
		}
		if !found {
			t.Errorf("-o %s lists no edge-oslo:\n%s", format, out)
		}
	}
}

func TestClustersRefusesAnUnknownOutputFormatBeforeReadingTheHub(t *testing.T) {
	_, _, err := runPlugin(t, "clusters", "--kubeconfig", "/nonexistent/kubeconfig", "-o", "xml")
	if err == nil || !strings.Contains(err.Error(), "xml") || !strings.Contains(err.Error(), "yaml") {
		t.Fatalf("got %v, want an error naming the format and the allowed ones", err)
	}
}
