package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"github.com/pmezard/go-difflib/difflib"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
)

// Change is what applying one object would do.
type Change struct {
	Ref    inventory.Ref
	Action vidrav1alpha1.PreviewAction
	// Diff is, for an update, a unified diff of the object's YAML as it is and as it would
	// be; Secret values are redacted.
	Diff string
	// Message says why a dry-run failed, or what could not be checked.
	Message string
}

// maxDiff bounds one object's diff: a preview lives in a status.
const maxDiff = 4 << 10

// Preview says what applying the objects, and releasing stale (what the inventory holds
// and the bundle no longer declares), would do on the cluster, without changing it: each
// object is server-side applied as a dry-run (admission, defaults and other field managers
// accounted for) and compared with the object as it is. Objects whose namespace or kind
// the bundle itself creates cannot be dry-run: they are reported as created, unchecked.
func (e *Engine) Preview(ctx context.Context, objects []*unstructured.Unstructured, stale []inventory.Ref, prune bool) []Change {
	changes := make([]Change, 0, len(objects)+len(stale))
	sorted := slices.Clone(objects)
	sortForApply(sorted)
	creates := map[string]bool{} // namespaces and kinds the bundle creates
	for _, o := range sorted {
		c := e.previewOne(ctx, o.DeepCopy(), creates)
		if c.Action == vidrav1alpha1.PreviewCreate {
			switch {
			case c.Ref.GVK.Group == "" && c.Ref.GVK.Kind == "Namespace":
				creates["ns/"+c.Ref.Name] = true
			case ssautils.IsClusterDefinition(o):
				group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
				kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
				creates["kind/"+group+"/"+kind] = true
			}
		}
		changes = append(changes, c)
	}
	for _, ref := range stale {
		changes = append(changes, e.previewRelease(ctx, ref, prune))
	}
	return changes
}

func (e *Engine) previewOne(ctx context.Context, o *unstructured.Unstructured, creates map[string]bool) Change {
	ref, err := e.Ref(o)
	if err != nil {
		if creates["kind/"+o.GroupVersionKind().Group+"/"+o.GetKind()] {
			return Change{Ref: ref, Action: vidrav1alpha1.PreviewCreate, Message: "its CustomResourceDefinition is created first: not dry-run"}
		}
		return Change{Ref: ref, Action: vidrav1alpha1.PreviewFailed, Message: err.Error()}
	}
	o.SetNamespace(ref.Namespace)
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(ref.GVK)
	err = e.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, live)
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return Change{Ref: ref, Action: vidrav1alpha1.PreviewFailed, Message: fmt.Sprintf("read %s: %v", ref, err)}
	case !ownership.IsManaged(live) && !e.Adopt && (e.JoinOnly == nil || !e.JoinOnly(ref)):
		return Change{Ref: ref, Action: vidrav1alpha1.PreviewNotManaged, Message: "exists and is not managed by Vidra: left untouched (adoptExisting: Always takes it over)"}
	}
	if live == nil && ref.Namespace != "" && creates["ns/"+ref.Namespace] {
		return Change{Ref: ref, Action: vidrav1alpha1.PreviewCreate, Message: "its namespace is created first: not dry-run"}
	}
	if live != nil && e.JoinOnly != nil && e.JoinOnly(ref) {
		return Change{Ref: ref, Action: vidrav1alpha1.PreviewUnchanged}
	}
	var liveMeta client.Object
	if live != nil {
		liveMeta = live
	}
	if err := ownership.StampPreview(o, liveMeta, e.Owner); err != nil {
		return Change{Ref: ref, Action: vidrav1alpha1.PreviewFailed, Message: err.Error()}
	}
	if err := e.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(e.FieldManager()), client.ForceOwnership, client.DryRunAll); err != nil {
		return Change{Ref: ref, Action: vidrav1alpha1.PreviewFailed, Message: fmt.Sprintf("dry-run of %s refused: %v", ref, err)}
	}
	if live == nil {
		return Change{Ref: ref, Action: vidrav1alpha1.PreviewCreate}
	}
	before, after := comparable(live), comparable(o)
	if ref.GVK.Group == "" && ref.GVK.Kind == "Secret" {
		redact(before, after)
	}
	a, errA := yaml.Marshal(before.Object)
	b, errB := yaml.Marshal(after.Object)
	if errA != nil || errB != nil {
		return Change{Ref: ref, Action: vidrav1alpha1.PreviewFailed, Message: "cannot print the object"}
	}
	if string(a) == string(b) {
		return Change{Ref: ref, Action: vidrav1alpha1.PreviewUnchanged}
	}
	diff, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(a)), B: difflib.SplitLines(string(b)), FromFile: "live", ToFile: "preview", Context: 2,
	})
	if len(diff) > maxDiff {
		diff = diff[:maxDiff] + "\n... (diff truncated)\n"
	}
	return Change{Ref: ref, Action: vidrav1alpha1.PreviewUpdate, Diff: diff}
}

// previewRelease says whether an object leaving the bundle would be deleted (no other
// owner) or only released.
func (e *Engine) previewRelease(ctx context.Context, ref inventory.Ref, prune bool) Change {
	live, err := e.ownership().Read(ctx, ref)
	switch {
	case errors.Is(err, ownership.ErrGone):
		return Change{Ref: ref, Action: vidrav1alpha1.PreviewUnchanged, Message: "already gone"}
	case err != nil:
		return Change{Ref: ref, Action: vidrav1alpha1.PreviewFailed, Message: fmt.Sprintf("read %s: %v", ref, err)}
	}
	owners, err := ownership.Owners(live)
	if err != nil {
		return Change{Ref: ref, Action: vidrav1alpha1.PreviewFailed, Message: err.Error()}
	}
	others := slices.DeleteFunc(owners, func(o string) bool { return o == e.Owner })
	switch {
	case len(others) > 0:
		return Change{Ref: ref, Action: vidrav1alpha1.PreviewRelease, Message: "kept for " + strings.Join(others, ", ")}
	case !prune:
		return Change{Ref: ref, Action: vidrav1alpha1.PreviewRelease, Message: "prune is off: released, not deleted"}
	}
	return Change{Ref: ref, Action: vidrav1alpha1.PreviewPrune}
}

// comparable is the object without what the API server alone sets: what a diff of
// declared changes should not show.
func comparable(o *unstructured.Unstructured) *unstructured.Unstructured {
	c := o.DeepCopy()
	for _, f := range []string{"managedFields", "resourceVersion", "generation", "uid", "creationTimestamp"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	// kubectl's copy of what it applied: noise here, and for a Secret its values.
	unstructured.RemoveNestedField(c.Object, "metadata", "annotations", "kubectl.kubernetes.io/last-applied-configuration")
	if len(c.GetAnnotations()) == 0 {
		unstructured.RemoveNestedField(c.Object, "metadata", "annotations")
	}
	unstructured.RemoveNestedField(c.Object, "status")
	return c
}

// redact hides a Secret's values on both sides, keeping which keys changed visible.
func redact(before, after *unstructured.Unstructured) {
	for _, field := range []string{"data", "stringData"} {
		b, _, _ := unstructured.NestedMap(before.Object, field)
		a, _, _ := unstructured.NestedMap(after.Object, field)
		for k, v := range b {
			if av, ok := a[k]; ok && fmt.Sprint(av) == fmt.Sprint(v) {
				b[k], a[k] = "(redacted)", "(redacted)"
			} else {
				b[k] = "(redacted: old value)"
			}
		}
		for k := range a {
			if a[k] != "(redacted)" {
				a[k] = "(redacted: new value)"
			}
		}
		if b != nil {
			_ = unstructured.SetNestedMap(before.Object, b, field)
		}
		if a != nil {
			_ = unstructured.SetNestedMap(after.Object, a, field)
		}
	}
}
