package apply

import (
	"context"
	"fmt"
	"time"

	ssautils "github.com/fluxcd/pkg/ssa/utils"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// waitForCRDs waits until every CRD among objects is Established, so the custom resources
// of the same bundle can be mapped and applied right after.
func (e *Engine) waitForCRDs(ctx context.Context, objects []*unstructured.Unstructured) error {
	timeout := e.CRDTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	for _, o := range objects {
		if !ssautils.IsCRD(o) {
			continue
		}
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := e.Client.Get(ctx, client.ObjectKey{Name: o.GetName()}, crd); err != nil {
				return false, nil //nolint:nilerr // not yet readable: keep waiting until the timeout
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return e.mapped(crd), nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CustomResourceDefinition %s not established within %v: %w", o.GetName(), timeout, err)
		}
	}
	return nil
}

// mapped says whether the kind of an established CRD is served in discovery yet: the API
// server publishes it there a moment after the CRD is established.
func (e *Engine) mapped(crd *apiextensionsv1.CustomResourceDefinition) bool {
	_, err := e.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind})
	return err == nil
}
