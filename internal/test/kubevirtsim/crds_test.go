package kubevirtsim_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

var member *testfleet.Cluster

func TestMain(m *testing.M) {
	os.Exit(testfleet.Main(m, testfleet.Options{Members: 1, MemberCRDDirectories: []string{"testdata/crds"}},
		func(f *testfleet.Fleet) { member = f.Members[0] }))
}

var (
	vmV1          = schema.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachine"}
	vmV1alpha3    = schema.GroupVersionKind{Group: "kubevirt.io", Version: "v1alpha3", Kind: "VirtualMachine"}
	vmiV1         = schema.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachineInstance"}
	restartCond   = []any{map[string]any{"type": "RestartRequired", "status": "True"}}
	minimalDomain = map[string]any{
		"devices":   map[string]any{},
		"resources": map[string]any{"requests": map[string]any{"memory": "64Mi"}},
	}
)

func TestCRDsAreServedLikeKubeVirts(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		shortNames []string
		status     bool
	}{
		{name: "virtualmachines.kubevirt.io", shortNames: []string{"vm", "vms"}, status: true},
		{name: "virtualmachineinstances.kubevirt.io", shortNames: []string{"vmi", "vmis"}, status: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			testfleet.Eventually(t, 30*time.Second, tc.name+" established", func() (bool, error) {
				if err := member.Client.Get(ctx, client.ObjectKey{Name: tc.name}, crd); err != nil {
					return false, err
				}
				for _, c := range crd.Status.Conditions {
					if c.Type == apiextensionsv1.Established {
						return c.Status == apiextensionsv1.ConditionTrue, nil
					}
				}
				return false, nil
			})

			if crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
				t.Errorf("scope = %s, want Namespaced", crd.Spec.Scope)
			}
			if !slices.Equal(crd.Spec.Names.ShortNames, tc.shortNames) || !slices.Equal(crd.Spec.Names.Categories, []string{"all"}) {
				t.Errorf("short names %v, categories %v; want %v, [all]", crd.Spec.Names.ShortNames, crd.Spec.Names.Categories, tc.shortNames)
			}
			if len(crd.Spec.Versions) != 2 {
				t.Fatalf("versions = %d, want v1 and v1alpha3", len(crd.Spec.Versions))
			}
			want := map[string]bool{"v1": true, "v1alpha3": false} // name: storage
			for _, v := range crd.Spec.Versions {
				storage, ok := want[v.Name]
				if !ok || !v.Served || v.Storage != storage {
					t.Errorf("version %s: served %v storage %v, want served and storage %v", v.Name, v.Served, v.Storage, storage)
				}
				if hasStatus := v.Subresources != nil && v.Subresources.Status != nil; hasStatus != tc.status {
					t.Errorf("version %s: status subresource %v, want %v", v.Name, hasStatus, tc.status)
				}
			}
			if !slices.Equal(crd.Status.StoredVersions, []string{"v1"}) {
				t.Errorf("stored versions = %v, want [v1]", crd.Status.StoredVersions)
			}
		})
	}
}

func TestVirtualMachineVersionsAndStatusSubresource(t *testing.T) {
	ctx := context.Background()
	vm := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "vm-status", "namespace": "default"},
		"spec": map[string]any{
			"runStrategy": "Always",
			"template":    map[string]any{"spec": map[string]any{"domain": minimalDomain}},
		},
	}}
	vm.SetGroupVersionKind(vmV1)
	if err := member.Client.Create(ctx, vm); err != nil {
		t.Fatalf("create VM at v1: %v", err)
	}

	// The same object read at the deprecated alias version.
	old := &unstructured.Unstructured{}
	old.SetGroupVersionKind(vmV1alpha3)
	if err := member.Client.Get(ctx, client.ObjectKeyFromObject(vm), old); err != nil {
		t.Fatalf("get VM at v1alpha3: %v", err)
	}
	if got := old.GetAPIVersion(); got != "kubevirt.io/v1alpha3" {
		t.Errorf("apiVersion = %s, want kubevirt.io/v1alpha3", got)
	}
	if s, _, _ := unstructured.NestedString(old.Object, "spec", "runStrategy"); s != "Always" {
		t.Errorf("v1alpha3 spec.runStrategy = %q, want Always", s)
	}
	if s, _, _ := unstructured.NestedString(old.Object, "spec", "template", "spec", "domain", "resources", "requests", "memory"); s != "64Mi" {
		t.Errorf("v1alpha3 memory request = %q, want 64Mi", s)
	}

	// Status is written through the status subresource...
	if err := unstructured.SetNestedSlice(vm.Object, restartCond, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	if err := member.Client.Status().Update(ctx, vm); err != nil {
		t.Fatalf("update VM status: %v", err)
	}
	assertRestartRequired(t, vm)

	// ...and a plain update of the VM keeps it, whatever status the update carries.
	ready := []any{map[string]any{"type": "Ready", "status": "False"}}
	if err := unstructured.SetNestedSlice(vm.Object, ready, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	vm.SetLabels(map[string]string{"updated": "yes"})
	if err := member.Client.Update(ctx, vm); err != nil {
		t.Fatalf("update VM: %v", err)
	}
	if vm.GetLabels()["updated"] != "yes" {
		t.Errorf("labels = %v, want the plain update applied", vm.GetLabels())
	}
	assertRestartRequired(t, vm)
}

// assertRestartRequired reads vm back and checks it has exactly the RestartRequired condition.
func assertRestartRequired(t *testing.T, vm *unstructured.Unstructured) {
	t.Helper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(vmV1)
	if err := member.Client.Get(context.Background(), client.ObjectKeyFromObject(vm), got); err != nil {
		t.Fatal(err)
	}
	conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	if len(conds) != 1 || conds[0].(map[string]any)["type"] != "RestartRequired" || conds[0].(map[string]any)["status"] != "True" {
		t.Errorf("status.conditions = %v, want [RestartRequired True]", conds)
	}
}

func TestVirtualMachineInstanceStatusIsPartOfTheResource(t *testing.T) {
	ctx := context.Background()
	vmi := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "vmi-status", "namespace": "default"},
		"spec":     map[string]any{"domain": minimalDomain},
	}}
	vmi.SetGroupVersionKind(vmiV1)
	if err := member.Client.Create(ctx, vmi); err != nil {
		t.Fatalf("create VMI: %v", err)
	}

	// Without a status subresource, as in KubeVirt, status is written by a plain update...
	if err := unstructured.SetNestedField(vmi.Object, "Running", "status", "phase"); err != nil {
		t.Fatal(err)
	}
	if err := member.Client.Update(ctx, vmi); err != nil {
		t.Fatalf("update VMI: %v", err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(vmiV1)
	if err := member.Client.Get(ctx, client.ObjectKeyFromObject(vmi), got); err != nil {
		t.Fatal(err)
	}
	if phase, _, _ := unstructured.NestedString(got.Object, "status", "phase"); phase != "Running" {
		t.Errorf("status.phase = %q, want Running", phase)
	}

	// ...and there is no /status to write it through.
	if err := member.Client.Status().Update(ctx, got); !apierrors.IsNotFound(err) {
		t.Errorf("VMI status update = %v, want NotFound", err)
	}
}
