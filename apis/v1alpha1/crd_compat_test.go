package v1alpha1_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// TestOriginalVidraManifestsApplyUnchanged applies manifests written for the original Vidra
// operator with kubectl, as their users would, and checks every original field survives
// and the new fields take their documented defaults.
func TestOriginalVidraManifestsApplyUnchanged(t *testing.T) {
	ctx := context.Background()
	for _, file := range []string{"testdata/original-vidraresource.yaml", "testdata/original-infrahubsync.yaml"} {
		if out, err := hub.Kubectl(ctx, nil, "apply", "-f", file); err != nil {
			t.Fatalf("kubectl apply -f %s: %v", file, err)
		} else {
			t.Logf("kubectl apply -f %s: %s", file, out)
		}
	}

	var vr vidrav1alpha1.VidraResource
	if err := hub.Client.Get(ctx, client.ObjectKey{Name: "vidraresource-sample"}, &vr); err != nil {
		t.Fatalf("get VidraResource: %v", err)
	}
	if got, want := vr.Spec.Destination, (vidrav1alpha1.Destination{Server: vidrav1alpha1.LocalClusterServer, Namespace: "default", ReconcileOnEvents: true}); got != want {
		t.Errorf("destination = %+v, want %+v", got, want)
	}
	if want := `{"apiVersion": "v1","kind": "Namespace","metadata":{"name": "ns-sample"}}`; vr.Spec.Manifest != want {
		t.Errorf("manifest = %q, want %q", vr.Spec.Manifest, want)
	}
	if vr.Spec.ReconciledAt == nil || !vr.Spec.ReconciledAt.Time.Equal(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("reconciledAt = %v, want 2025-01-01T00:00:00Z", vr.Spec.ReconciledAt)
	}
	if vr.Spec.Prune == nil || !*vr.Spec.Prune {
		t.Errorf("prune = %v, want the default true", vr.Spec.Prune)
	}
	if vr.Spec.AdoptExisting != vidrav1alpha1.AdoptNever {
		t.Errorf("adoptExisting = %q, want the default Never", vr.Spec.AdoptExisting)
	}
	if vr.Spec.Suspend || vr.Spec.VMRollout != nil || vr.Spec.ServiceAccountName != "" {
		t.Errorf("new optional fields set without being asked for: %+v", vr.Spec)
	}

	var ihs vidrav1alpha1.InfrahubSync
	if err := hub.Client.Get(ctx, client.ObjectKey{Name: "infrahubsync-sample"}, &ihs); err != nil {
		t.Fatalf("get InfrahubSync: %v", err)
	}
	if ihs.Namespace != "" {
		t.Errorf("cluster-scoped InfrahubSync kept namespace %q", ihs.Namespace)
	}
	src := ihs.Spec.Source
	if src.InfrahubAPIURL != "http://infrahub-server:8000" || src.TargetBranch != "main" ||
		src.TargetDate != "2025-01-01T00:00:00Z" || src.ArtefactName != "Webserver_Manifest" {
		t.Errorf("source = %+v, original fields changed", src)
	}
	if ihs.Spec.Interval == nil || ihs.Spec.Interval.Duration != time.Minute {
		t.Errorf("interval = %v, want the default 1m", ihs.Spec.Interval)
	}
	if src.InsecureAllowHTTP || src.CredentialsSecretRef != nil || src.CASecretRef != nil || src.QueryName != "" ||
		ihs.Spec.AllowEmpty || ihs.Spec.Suspend || ihs.Spec.Destination.ClusterFromTarget {
		t.Errorf("new optional source fields set without being asked for: %+v", src)
	}
	if ihs.Spec.Destination.Server != vidrav1alpha1.LocalClusterServer || !ihs.Spec.Destination.ReconcileOnEvents {
		t.Errorf("destination = %+v, original fields changed", ihs.Spec.Destination)
	}

	// A second apply of the same files changes nothing.
	for _, file := range []string{"testdata/original-vidraresource.yaml", "testdata/original-infrahubsync.yaml"} {
		out, err := hub.Kubectl(ctx, nil, "apply", "-f", file)
		if err != nil {
			t.Fatalf("second kubectl apply -f %s: %v", file, err)
		}
		if !strings.Contains(out, "unchanged") {
			t.Errorf("second kubectl apply -f %s = %q, want unchanged", file, out)
		}
	}
}

// TestTargetBranchDefaultsToMain: the original API required targetBranch; it is now
// optional and defaults to main.
func TestTargetBranchDefaultsToMain(t *testing.T) {
	ctx := context.Background()
	ihs := &vidrav1alpha1.InfrahubSync{
		ObjectMeta: metav1.ObjectMeta{Name: "branch-default"},
		Spec: vidrav1alpha1.InfrahubSyncSpec{Source: vidrav1alpha1.InfrahubSyncSource{
			InfrahubAPIURL: "https://infrahub.example.com", ArtefactName: "manifests",
		}},
	}
	if err := hub.Client.Create(ctx, ihs); err != nil {
		t.Fatalf("create: %v", err)
	}
	if ihs.Spec.Source.TargetBranch != "main" {
		t.Errorf("targetBranch = %q, want main", ihs.Spec.Source.TargetBranch)
	}
	if ihs.Spec.Destination.Server != "" || ihs.Spec.Destination.Cluster != "" {
		t.Errorf("destination defaulted to %+v, want the local cluster (empty)", ihs.Spec.Destination)
	}
}

// TestVMRolloutDefaults: an empty vmRollout block gets Rolling, 1 and 10m.
func TestVMRolloutDefaults(t *testing.T) {
	ctx := context.Background()
	vr := &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "vmrollout-defaults"},
		Spec:       vidrav1alpha1.VidraResourceSpec{VMRollout: &vidrav1alpha1.VMRolloutSpec{}},
	}
	if err := hub.Client.Create(ctx, vr); err != nil {
		t.Fatalf("create: %v", err)
	}
	got := vr.Spec.VMRollout
	if got.Strategy != vidrav1alpha1.VMRolloutRolling {
		t.Errorf("strategy = %q, want Rolling", got.Strategy)
	}
	if got.MaxUnavailable == nil || *got.MaxUnavailable != intstr.FromInt32(1) {
		t.Errorf("maxUnavailable = %v, want 1", got.MaxUnavailable)
	}
	if got.ReadyTimeout == nil || got.ReadyTimeout.Duration != 10*time.Minute {
		t.Errorf("readyTimeout = %v, want 10m", got.ReadyTimeout)
	}
}

// TestOriginalStatusFieldsKeepTheirJSONNames: scripts of the original Vidra read
// .status.DeployState (capitalised), .status.lastError and .status.managedResources.
func TestOriginalStatusFieldsKeepTheirJSONNames(t *testing.T) {
	ctx := context.Background()
	vr := &vidrav1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: "status-names"}}
	if err := hub.Client.Create(ctx, vr); err != nil {
		t.Fatalf("create: %v", err)
	}
	vr.Status = vidrav1alpha1.VidraResourceStatus{
		DeployState: vidrav1alpha1.StateFailed,
		LastError:   "apply v1/ConfigMap default/x: forbidden",
		ManagedResources: []vidrav1alpha1.ManagedResource{
			{APIVersion: "v1", Kind: "ConfigMap", Name: "x", Namespace: "default"},
		},
	}
	if err := hub.Client.Status().Update(ctx, vr); err != nil {
		t.Fatalf("update status: %v", err)
	}

	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(vidrav1alpha1.GroupVersion.WithKind("VidraResource"))
	if err := hub.Client.Get(ctx, client.ObjectKey{Name: "status-names"}, u); err != nil {
		t.Fatalf("get: %v", err)
	}
	if s, _, _ := unstructured.NestedString(u.Object, "status", "DeployState"); s != "Failed" {
		t.Errorf(".status.DeployState = %q, want Failed", s)
	}
	if s, _, _ := unstructured.NestedString(u.Object, "status", "lastError"); s != vr.Status.LastError {
		t.Errorf(".status.lastError = %q", s)
	}
	if l, _, _ := unstructured.NestedSlice(u.Object, "status", "managedResources"); len(l) != 1 {
		t.Errorf(".status.managedResources = %v, want one entry", l)
	}

	// The status subresource is the only way to write status: a spec update keeps it.
	vr.Spec.Suspend = true
	vr.Status.DeployState = vidrav1alpha1.StateSucceeded
	if err := hub.Client.Update(ctx, vr); err != nil {
		t.Fatalf("update spec: %v", err)
	}
	if vr.Status.DeployState != vidrav1alpha1.StateFailed {
		t.Errorf("a spec update changed status.DeployState to %q", vr.Status.DeployState)
	}
}

// TestSamplesAreAccepted: every sample in config/samples is valid as written.
func TestSamplesAreAccepted(t *testing.T) {
	samples, err := filepath.Glob("../../config/samples/*.yaml")
	if err != nil || len(samples) == 0 {
		t.Fatalf("no samples found (%v)", err)
	}
	for _, sample := range samples {
		if _, err := hub.Kubectl(context.Background(), nil, "apply", "--dry-run=server", "-f", sample); err != nil {
			t.Errorf("sample %s: %v", sample, err)
		}
	}
}
