package ctrlqueue

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// Requests is the NewQueue option of a controller of one cluster's objects.
func Requests() NewFunc[reconcile.Request] { return New(wakeRequest) }

// ClusterRequests is the NewQueue option of a multi-cluster controller.
func ClusterRequests() NewFunc[mcreconcile.Request] {
	return New(func(n int) mcreconcile.Request { return mcreconcile.Request{Request: wakeRequest(n)} })
}

// wakeRequest is the n-th wake-up key: a name no object may have (no ':' is allowed in
// one), never reconciled.
func wakeRequest(n int) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Name: fmt.Sprintf("ctrlqueue:wake-%d", n)}}
}
