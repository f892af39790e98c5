package fanout

import (
	"context"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StatusWrites remembers, per sync, the resourceVersion of this process's last status
// write: a rollout decides from its status, which a lagging cache must not roll back.
type StatusWrites struct {
	written sync.Map
}

// Wrote records a status write of obj.
func (w *StatusWrites) Wrote(obj client.Object) {
	w.written.Store(obj.GetName(), obj.GetResourceVersion())
}

// Forget drops what is remembered of a deleted sync.
func (w *StatusWrites) Forget(name string) {
	w.written.Delete(name)
}

// Read returns the sync from the cache, or from the API server (api) while the cache
// does not yet show this process's last status write.
func Read[T client.Object](ctx context.Context, w *StatusWrites, cache, api client.Reader, key client.ObjectKey, newObj func() T) (T, error) {
	obj := newObj()
	if err := cache.Get(ctx, key, obj); err != nil {
		return obj, err
	}
	last, ok := w.written.Load(key.Name)
	if !ok {
		return obj, nil
	}
	if last.(string) == obj.GetResourceVersion() {
		w.written.Delete(key.Name) // the cache has caught up
		return obj, nil
	}
	fresh := newObj()
	if err := api.Get(ctx, key, fresh); err != nil {
		return fresh, err
	}
	// Until the cache shows what the API server said, it is read from there.
	w.written.Store(key.Name, fresh.GetResourceVersion())
	return fresh, nil
}
