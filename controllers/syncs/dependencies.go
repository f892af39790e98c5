package syncs

import (
	"context"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fanout"
)

// maxDependencyWalk bounds the syncs a search for a cycle reads: far more than any
// chain of dependsOn people write, few enough that a sync's reconcile never waits on it.
const maxDependencyWalk = 256

// stallCycle stalls a sync whose spec.dependsOn makes a cycle, naming it.
func (r *Reconciler) stallCycle(ctx context.Context, obj Object) (bool, error) {
	cycle, err := r.dependencyCycle(ctx, obj)
	if err != nil || cycle == "" {
		return false, err
	}
	msg := "spec.dependsOn makes a cycle, " + cycle + ": each would wait for itself on every cluster; remove one of them"
	markStalled(obj, vidrav1alpha1.ReasonDependencyCycle, msg)
	r.warn(obj, vidrav1alpha1.ReasonDependencyCycle, msg)
	return true, nil
}

// dependencyCycle is the cycle of spec.dependsOn through obj, as people read it
// ("GitSync a → HelmSync b → GitSync a"), or "" when none passes through it. Each sync
// of a cycle would wait for itself on every cluster: it is stalled instead, named, and
// delivers nothing new until the cycle is broken. A dependency that does not exist ends
// its branch: each VidraResource that waits for it says so.
func (r *Reconciler) dependencyCycle(ctx context.Context, obj Object) (string, error) {
	self := vidrav1alpha1.SyncReference{Kind: obj.SyncKind().Kind, Name: obj.GetName()}
	path := []vidrav1alpha1.SyncReference{self}
	seen := map[vidrav1alpha1.SyncReference]bool{self: true}
	var walk func(deps []vidrav1alpha1.SyncReference) (bool, error)
	walk = func(deps []vidrav1alpha1.SyncReference) (bool, error) {
		for _, dep := range deps {
			if dep == self {
				path = append(path, dep)
				return true, nil
			}
			if seen[dep] || len(seen) >= maxDependencyWalk {
				continue
			}
			seen[dep] = true
			next, err := r.dependenciesOf(ctx, dep)
			if err != nil {
				return false, err
			}
			path = append(path, dep)
			if found, err := walk(next); found || err != nil {
				return found, err
			}
			path = path[:len(path)-1]
		}
		return false, nil
	}
	found, err := walk(obj.Dependencies())
	if !found || err != nil {
		return "", err
	}
	names := make([]string, len(path))
	for i, ref := range path {
		names[i] = ref.Kind + " " + ref.Name
	}
	return strings.Join(names, " → "), nil
}

// dependenciesOf are the dependencies of the sync ref names (none when it does not exist).
func (r *Reconciler) dependenciesOf(ctx context.Context, ref vidrav1alpha1.SyncReference) ([]vidrav1alpha1.SyncReference, error) {
	sync, err := fanout.SyncOf(ctx, r.Hub, ref, client.UnsafeDisableDeepCopy)
	if err != nil || sync == nil {
		return nil, err
	}
	return sync.Dependencies(), nil
}
