package main

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// createResource writes a VidraResource and its status on the hub, as the operator would,
// and deletes it when the test ends.
func createResource(t *testing.T, vr *vidrav1alpha1.VidraResource) *vidrav1alpha1.VidraResource {
	t.Helper()
	ctx := context.Background()
	hub := fleet.Hub.Client
	status := vr.Status
	if vr.Spec.Manifest == "" {
		vr.Spec.Manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: greeting}\ndata: {text: hello}\n"
	}
	if err := hub.Create(ctx, vr); err != nil {
		t.Fatalf("create VidraResource %s: %v", vr.Name, err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), vr) })
	vr.Status = status
	if err := hub.Status().Update(ctx, vr); err != nil {
		t.Fatalf("status of VidraResource %s: %v", vr.Name, err)
	}
	return vr
}

func conditions(cs ...metav1.Condition) []metav1.Condition {
	for i := range cs {
		cs[i].LastTransitionTime = metav1.NewTime(time.Now().Add(-2 * time.Minute))
	}
	return cs
}

// bundles writes three VidraResources: two for edge-paris (one applied, one failing, the
// latter not yet resolved by the operator) and one for edge-lyon.
func bundles(t *testing.T) {
	t.Helper()
	createResource(t, &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "web-paris", Labels: map[string]string{vidrav1alpha1.InfrahubSyncLabel: "webserver"}},
		Spec:       vidrav1alpha1.VidraResourceSpec{Destination: vidrav1alpha1.Destination{Cluster: "edge-paris", Namespace: "web"}},
		Status: vidrav1alpha1.VidraResourceStatus{
			Cluster: "edge-paris", DeployState: vidrav1alpha1.StateSucceeded, ResourceCount: 3,
			Conditions: conditions(metav1.Condition{Type: vidrav1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: vidrav1alpha1.ReasonSucceeded, Message: "applied 3 objects"}),
			VMRollout:  &vidrav1alpha1.VMRolloutStatus{Phase: vidrav1alpha1.VMRolloutProgressing, Total: 3, Updated: 1, Pending: 1, Unavailable: 1},
		},
	})
	createResource(t, &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "dns-paris"},
		Spec:       vidrav1alpha1.VidraResourceSpec{Destination: vidrav1alpha1.Destination{Cluster: "edge-paris"}},
		Status: vidrav1alpha1.VidraResourceStatus{
			DeployState: vidrav1alpha1.StateFailed,
			LastError: "apply ConfigMap kube-system/coredns: conflict: field .data.Corefile is declared differently by\n" +
				"hub/dns-base, which applied it first",
			Conditions: conditions(metav1.Condition{Type: vidrav1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: vidrav1alpha1.ReasonConflict, Message: "conflict"}),
		},
	})
	createResource(t, &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "web-lyon"},
		Spec:       vidrav1alpha1.VidraResourceSpec{Destination: vidrav1alpha1.Destination{Cluster: "edge-lyon"}},
		Status:     vidrav1alpha1.VidraResourceStatus{Cluster: "edge-lyon", DeployState: vidrav1alpha1.StateRunning, ResourceCount: 1},
	})
}

func TestGetListsTheBundlesOfTheFleet(t *testing.T) {
	bundles(t)
	out, stderr, err := runPlugin(t, "get", "--kubeconfig", hubKubeconfig(t))
	if err != nil {
		t.Fatalf("get: %v\n%s", err, stderr)
	}
	tb := parseTable(t, out, "NAME", "CLUSTER", "STATE", "OBJECTS", "READY", "LAST ERROR")
	tb.expectRow(t, "web-paris", map[string]string{"CLUSTER": "edge-paris", "STATE": "Succeeded", "OBJECTS": "3", "READY": "True", "LAST ERROR": ""})
	// Not resolved yet: the cluster its spec names; the error on one line, cut to 60.
	tb.expectRow(t, "dns-paris", map[string]string{
		"CLUSTER": "edge-paris", "STATE": "Failed", "OBJECTS": "0", "READY": "False",
		"LAST ERROR": "apply ConfigMap kube-system/coredns: conflict: field .dat...",
	})
	tb.expectRow(t, "web-lyon", map[string]string{"CLUSTER": "edge-lyon", "STATE": "Running", "OBJECTS": "1", "READY": "<none>"})
}

func TestGetShowsOnlyTheBundlesOfOneCluster(t *testing.T) {
	bundles(t)
	out, stderr, err := runPlugin(t, "get", "--kubeconfig", hubKubeconfig(t), "--cluster", "edge-paris")
	if err != nil {
		t.Fatalf("get --cluster: %v\n%s", err, stderr)
	}
	tb := parseTable(t, out, "NAME", "CLUSTER", "STATE", "OBJECTS", "READY", "LAST ERROR")
	if len(tb.rows) != 2 || tb.rows["web-paris"] == nil || tb.rows["dns-paris"] == nil {
		t.Errorf("get --cluster edge-paris: got rows %v, want web-paris and dns-paris", tb.rows)
	}

	out, stderr, err = runPlugin(t, "get", "--kubeconfig", hubKubeconfig(t), "--cluster", "edge-nowhere")
	if err != nil || out != "" || !strings.Contains(stderr, `No VidraResources go to cluster "edge-nowhere"`) {
		t.Errorf("get --cluster edge-nowhere: err %v, stdout %q, stderr %q", err, out, stderr)
	}
}

func TestGetWideShowsAgeVMRolloutAndTheSync(t *testing.T) {
	bundles(t)
	createResource(t, &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "site-lyon", Labels: map[string]string{vidrav1alpha1.GitSyncLabel: "site"}},
		Spec:       vidrav1alpha1.VidraResourceSpec{Destination: vidrav1alpha1.Destination{Cluster: "edge-lyon"}},
	})
	out, stderr, err := runPlugin(t, "get", "--kubeconfig", hubKubeconfig(t), "-o", "wide")
	if err != nil {
		t.Fatalf("get -o wide: %v\n%s", err, stderr)
	}
	tb := parseTable(t, out, "NAME", "CLUSTER", "STATE", "OBJECTS", "READY", "AGE", "VM ROLLOUT", "SYNC", "LAST ERROR")
	tb.expectRow(t, "web-paris", map[string]string{"VM ROLLOUT": "Progressing 1/3", "SYNC": "ihs/webserver"})
	tb.expectRow(t, "site-lyon", map[string]string{"SYNC": "gs/site"})
	tb.expectRow(t, "web-lyon", map[string]string{"VM ROLLOUT": "<none>", "SYNC": "<none>"})
	if a := tb.row(t, "web-paris")["AGE"]; !strings.HasSuffix(a, "s") {
		t.Errorf("web-paris AGE %q, want seconds", a)
	}
}

func TestGetPrintsTheVidraResourcesAsYAML(t *testing.T) {
	bundles(t)
	out, stderr, err := runPlugin(t, "get", "--kubeconfig", hubKubeconfig(t), "--cluster", "edge-lyon", "-o", "yaml")
	if err != nil {
		t.Fatalf("get -o yaml: %v\n%s", err, stderr)
	}
	var list struct {
		Kind  string                        `json:"kind"`
		Items []vidrav1alpha1.VidraResource `json:"items"`
	}
	if err := yaml.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("-o yaml does not parse: %v\n%s", err, out)
	}
	if list.Kind != "List" || len(list.Items) != 1 || list.Items[0].Name != "web-lyon" || list.Items[0].Kind != "VidraResource" ||
		list.Items[0].Status.DeployState != vidrav1alpha1.StateRunning {
		t.Errorf("get --cluster edge-lyon -o yaml:\n%s", out)
	}
}
