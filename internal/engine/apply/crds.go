package apply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrStalled marks an error that waiting or retrying cannot heal: the bundle must change
// (for example a CRD whose names the API server refuses).
var ErrStalled = errors.New("stalled")

// crdGVK is read as unstructured, so the wait never depends on the client's scheme.
var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// waitForCRDs waits until every CRD among objects is Established and every version it
// serves is mapped by the client, so the custom resources of the same bundle can be
// applied right after. An error that waiting cannot heal returns at once; a timeout says
// what was seen last. The results of the CRDs applied then hold them as last read,
// established: judged as the apply returned them, before the API server established
// them, they would keep the bundle from Ready until the next health poll. And the memo
// holds them at that read's version when only their status changed since the apply, or
// the next reconcile would apply each again (seconds for a CRD with a large schema).
func (e *Engine) waitForCRDs(ctx context.Context, objects []*unstructured.Unstructured, results []Result) error {
	timeout := e.CRDTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	for _, o := range objects {
		if !ssautils.IsCRD(o) {
			continue
		}
		var last error
		var established *unstructured.Unstructured
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			established, last = e.crdReady(ctx, o.GetName())
			switch {
			case last == nil:
				return true, nil
			case errors.Is(last, ErrStalled):
				return false, last
			default:
				return false, nil
			}
		})
		switch {
		case err == nil:
		case errors.Is(err, ErrStalled):
			return err
		case last != nil:
			return fmt.Errorf("CustomResourceDefinition %s not ready within %v: %w", o.GetName(), timeout, last)
		default:
			return fmt.Errorf("CustomResourceDefinition %s not ready within %v: %w", o.GetName(), timeout, err)
		}
		for i := range results {
			if res := &results[i]; res.Object != nil && res.Ref.GVK.GroupKind() == crdGVK.GroupKind() && res.Ref.Name == o.GetName() {
				if changedInStatusAlone(res.Object, established) {
					e.Memo.advance(e.Owner, res.Ref, res.Object.GetResourceVersion(), established.GetResourceVersion())
				}
				res.Object = established
			}
		}
	}
	return nil
}

// crdReady returns the CRD as read, or says why it is not ready to have its resources
// applied. Errors wrapping ErrStalled cannot heal by waiting.
func (e *Engine) crdReady(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(crdGVK)
	if err := e.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		if retriable(err) {
			return nil, fmt.Errorf("read it: %w", err)
		}
		return nil, fmt.Errorf("read CustomResourceDefinition %s: %w: %w", name, ErrStalled, err)
	}
	if status, message := crdCondition(crd, "NamesAccepted"); status == "False" {
		return nil, fmt.Errorf("CustomResourceDefinition %s: names not accepted: %s: %w", name, message, ErrStalled)
	}
	if status, message := crdCondition(crd, "Established"); status != "True" {
		return nil, fmt.Errorf("not established yet (%s)", orUnknown(message))
	}
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		version, _ := v.(map[string]any)
		if served, _ := version["served"].(bool); !served {
			continue
		}
		name, _ := version["name"].(string)
		// The mapper asks discovery again on a miss: the API server publishes a newly
		// established version there a moment later.
		if _, err := e.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: group, Kind: kind}, name); err != nil {
			if meta.IsNoMatchError(err) {
				return nil, fmt.Errorf("%s/%s %s is established but not served in discovery yet", group, name, kind)
			}
			return nil, fmt.Errorf("map %s/%s %s: %w", group, name, kind, err)
		}
	}
	return crd, nil
}

// changedInStatusAlone says whether after is before with only its status changed (and
// with it the resourceVersion and the managed fields of status writes): nothing an apply
// declares, or reads of the object, changed.
func changedInStatusAlone(before, after *unstructured.Unstructured) bool {
	return equality.Semantic.DeepEqual(withoutStatus(before), withoutStatus(after))
}

// withoutStatus is the object without its status, resourceVersion and the managed
// fields of status writes, sharing the rest with it.
func withoutStatus(u *unstructured.Unstructured) map[string]any {
	object := maps.Clone(u.Object)
	delete(object, "status")
	metadata, _ := object["metadata"].(map[string]any)
	metadata = maps.Clone(metadata)
	if metadata == nil {
		metadata = map[string]any{}
	}
	delete(metadata, "resourceVersion")
	entries, _ := metadata["managedFields"].([]any)
	metadata["managedFields"] = slices.DeleteFunc(slices.Clone(entries), func(e any) bool {
		entry, _ := e.(map[string]any)
		return entry["subresource"] == "status"
	})
	object["metadata"] = metadata
	return object
}

// crdCondition is the status and message of the CRD's condition of type t.
func crdCondition(crd *unstructured.Unstructured, t string) (status, message string) {
	conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conditions {
		condition, _ := c.(map[string]any)
		if condition["type"] == t {
			status, _ = condition["status"].(string)
			message, _ = condition["message"].(string)
			return status, message
		}
	}
	return "", ""
}

func orUnknown(s string) string {
	if s == "" {
		return "no condition yet"
	}
	return s
}

// retriable says whether a request error may pass by itself.
func retriable(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsUnexpectedServerError(err) || errors.Is(err, context.DeadlineExceeded) || !isAPIStatus(err)
}

func isAPIStatus(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status)
}
