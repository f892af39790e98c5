// Package scheme builds the operator's scheme: the Go types its clients and caches know,
// on the hub and on every member. Tests run the operator with this same scheme, so a
// path that works only with a richer test scheme cannot pass unnoticed.
package scheme

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kubevirtv1 "kubevirt.io/api/core/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// New returns client-go's types, Vidra's and KubeVirt's.
func New() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("add client-go types to scheme: %w", err)
	}
	if err := vidrav1alpha1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("add Vidra types to scheme: %w", err)
	}
	if err := kubevirtv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("add KubeVirt types to scheme: %w", err)
	}
	return s, nil
}
