package testfleet

import (
	"context"
	"testing"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Edit changes obj (named by its key) on the API server as a person would: read it into
// obj, change it, write it, and all again when another writer (the controller's status
// write) came in between. obj holds what was written.
func Edit[T client.Object](t testing.TB, c client.Client, obj T, change func(T)) {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(context.Background(), key, obj); err != nil {
			return err
		}
		change(obj)
		return c.Update(context.Background(), obj)
	})
	if err != nil {
		t.Fatalf("edit %s: %v", key, err)
	}
}
