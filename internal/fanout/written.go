package fanout

import (
	"encoding/json"
	"hash/maphash"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Written remembers what the syncs of a kind last wrote to each of their VidraResources,
// so that their controller is woken by the changes others make, not by its own: without
// it, a sync's creates and updates requeue it, and every change is delivered twice (a
// second listing of the source and pass over its VidraResources, a thousand of them for
// a sync of a thousand clusters). What is remembered is recorded before the write, so an
// event that comes before the write's answer is known too; and it is a state, not a
// resourceVersion, so a VidraResource that is as its sync wrote it wakes nobody, whoever
// made it so.
type Written struct {
	seed  maphash.Seed
	mu    sync.Mutex
	state map[string]writtenState
}

// writtenState identifies the fields a sync wrote: a hash of them, and which of those
// the API server defaults were written (see syncFields).
type writtenState struct {
	hash uint64
	set  optionalFields
}

// NewWritten remembers nothing yet.
func NewWritten() *Written {
	return &Written{seed: maphash.MakeSeed(), state: map[string]writtenState{}}
}

// record remembers vr as its sync writes it now from template tpl (nil: none). A nil
// Written remembers nothing.
func (w *Written) record(vr *vidrav1alpha1.VidraResource, tpl *vidrav1alpha1.VidraResourceTemplate) {
	if w == nil {
		return
	}
	set := templated(tpl)
	st := writtenState{hash: w.hash(vr, set), set: set}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.state[vr.Name] = st
}

// asWritten says whether obj is as its sync last wrote it.
func (w *Written) asWritten(obj client.Object) bool {
	vr, ok := obj.(*vidrav1alpha1.VidraResource)
	if w == nil || !ok {
		return false
	}
	w.mu.Lock()
	st, ok := w.state[vr.Name]
	w.mu.Unlock()
	return ok && st.hash != 0 && w.hash(vr, st.set) == st.hash
}

// forget forgets a VidraResource that is gone.
func (w *Written) forget(obj client.Object) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.state, obj.GetName())
}

// ByOthers passes the events of VidraResources that are not as their sync last wrote
// them; a deletion always passes, and is forgotten.
func (w *Written) ByOthers() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return !w.asWritten(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool { return !w.asWritten(e.ObjectNew) },
		DeleteFunc: func(e event.DeleteEvent) bool {
			w.forget(e.Object)
			return true
		},
	}
}

// optionalFields are the spec fields a sync writes only when its template sets them,
// and which the API server defaults, or someone else sets, when it does not.
type optionalFields uint8

const (
	prune optionalFields = 1 << iota
	adoptExisting
	vmRollout
	historyLimit
)

// templated are the optional fields tpl sets (applyTemplate).
func templated(tpl *vidrav1alpha1.VidraResourceTemplate) optionalFields {
	var set optionalFields
	if tpl == nil {
		return set
	}
	if tpl.Prune != nil {
		set |= prune
	}
	if tpl.AdoptExisting != "" {
		set |= adoptExisting
	}
	if tpl.VMRollout != nil {
		set |= vmRollout
	}
	if tpl.HistoryLimit != nil {
		set |= historyLimit
	}
	return set
}

// syncFields are the fields of a VidraResource a sync writes: its metadata's labels and
// annotations, and its spec but the optional fields that were not written (a default
// the API server filled in, or a value someone else set, which the sync leaves alone).
type syncFields struct {
	Labels      map[string]string
	Annotations map[string]string
	Spec        vidrav1alpha1.VidraResourceSpec
}

// hash identifies vr's fields a sync writes, with only the optional ones in set.
func (w *Written) hash(vr *vidrav1alpha1.VidraResource, set optionalFields) uint64 {
	f := syncFields{Labels: vr.Labels, Annotations: vr.Annotations, Spec: vr.Spec}
	if set&prune == 0 {
		f.Spec.Prune = nil
	}
	if set&adoptExisting == 0 {
		f.Spec.AdoptExisting = ""
	}
	if set&vmRollout == 0 {
		f.Spec.VMRollout = nil
	}
	if set&historyLimit == 0 {
		f.Spec.HistoryLimit = nil
	}
	b, err := json.Marshal(f)
	if err != nil {
		return 0 // never matches; unreachable, as the fields are strings, bools and numbers
	}
	return maphash.Bytes(w.seed, b)
}
