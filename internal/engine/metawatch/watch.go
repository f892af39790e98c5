// Package metawatch watches the metadata of one kind's objects that match a label
// selector, in one namespace or in all, and keeps of each object only what its reader
// names: identity, resourceVersion, generation, deletion, chosen labels and annotations,
// and its managed-fields entries as a transform left them. An informer keeps each whole
// object in an indexed store behind a queue and handler goroutines; a watch here is a
// client-go Reflector writing into a map of small records, so a watched object costs
// about 120 bytes (its slot in the map, holding its record, and its name) and a watch
// three goroutines.
package metawatch

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	toolscache "k8s.io/client-go/tools/cache"
)

// Keep names the labels and annotations a watch keeps of each object, and whether it
// keeps their managed-fields entries.
type Keep struct {
	Labels, Annotations []string
	// ManagedFields keeps each object's managed-fields entries, as Transform left them;
	// without it none are kept, whatever the server sent.
	ManagedFields bool
}

// Options configure a Watch.
type Options struct {
	// Client reads the cluster's metadata.
	Client metadata.Interface
	// Resource and Kind are what is watched.
	Resource schema.GroupVersionResource
	Kind     schema.GroupVersionKind
	// Namespace is the only namespace watched; "" for all (or a cluster-scoped kind).
	Namespace string
	// Selector selects the objects watched; nil for all.
	Selector labels.Selector
	Keep     Keep
	// IndexLabel, when set, groups the objects by that label's value, which ByLabel reads;
	// Keep.Labels must name it.
	IndexLabel string
	// Transform, when set, changes an object before it is kept.
	Transform func(*metav1.PartialObjectMetadata)
	// OnChange, when set, is told of an object the watch had that changed (now is its new
	// metadata) or went (now is nil). Objects coming into view are not reported. It is
	// called from the watch's goroutine, one object at a time.
	OnChange func(was, now *metav1.PartialObjectMetadata)
	// OnListed, when set, is told of each object a list brings into view: all its first
	// list finds, and what a list after the watch could not resume finds new. A change
	// made before the watch began shows only there. It is called from the watch's
	// goroutine, one object at a time, before HasSynced says true.
	OnListed func(now *metav1.PartialObjectMetadata)
}

// Watch keeps the metadata of the objects it watches; Run runs it.
type Watch struct {
	opts    Options
	mu      sync.RWMutex
	records map[key]record
	// byLabel holds the keys of the records by their IndexLabel's value. The keys of one
	// value are few (a VidraResource's revisions), and a slice of them is a tenth of the
	// smallest map.
	byLabel map[string][]key
	synced  atomic.Bool
}

// key names an object; namespaces are interned, as many objects share one.
type key struct {
	namespace unique.Handle[string]
	name      string
}

func keyOf(namespace, name string) key {
	return key{unique.Make(namespace), name}
}

// New returns a watch that runs once Run is called.
func New(opts Options) *Watch {
	return &Watch{opts: opts, records: map[key]record{}, byLabel: map[string][]key{}}
}

// Run lists and watches until ctx ends, listing again whenever the watch cannot resume;
// failures are logged by the reflector through ctx's logger and retried with backoff.
func (w *Watch) Run(ctx context.Context) {
	resource := w.resource()
	selector := ""
	if w.opts.Selector != nil {
		selector = w.opts.Selector.String()
	}
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			list, err := resource.List(ctx, o)
			return list, stopping(ctx, err)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			w, err := resource.Watch(ctx, o)
			return w, stopping(ctx, err)
		},
	}
	name := w.opts.Kind.String()
	if w.opts.Namespace != "" {
		name += " in " + w.opts.Namespace
	}
	toolscache.NewReflectorWithOptions(lw, &metav1.PartialObjectMetadata{}, (*store)(w),
		toolscache.ReflectorOptions{Name: name, TypeDescription: w.opts.Kind.String()}).RunWithContext(ctx)
}

// stopping turns the error of a request cut short by the watch's end into io.EOF, which
// the reflector takes for a watch that closed normally: a watch stopped on purpose (its
// kind unused, its cluster gone) logs no error.
func stopping(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return io.EOF
	}
	return err
}

func (w *Watch) resource() metadata.ResourceInterface {
	r := w.opts.Client.Resource(w.opts.Resource)
	if w.opts.Namespace != "" {
		return r.Namespace(w.opts.Namespace)
	}
	return r
}

// HasSynced says whether the watch has listed its objects once.
func (w *Watch) HasSynced() bool {
	return w.synced.Load()
}

// Get is the object's metadata as the watch has it. Before the watch has synced, or when
// the object is not watched (another namespace, not selected), it is not known.
func (w *Watch) Get(namespace, name string) (*metav1.PartialObjectMetadata, bool) {
	w.mu.RLock()
	r, ok := w.records[keyOf(namespace, name)]
	w.mu.RUnlock()
	if !ok {
		return nil, false
	}
	return r.object(w.opts.Kind, namespace, name), true
}

// Len is the number of objects the watch has.
func (w *Watch) Len() int {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return len(w.records)
}

// ByLabel is the metadata of the objects whose IndexLabel has the value, as the watch has
// them, in no order.
func (w *Watch) ByLabel(value string) []*metav1.PartialObjectMetadata {
	w.mu.RLock()
	defer w.mu.RUnlock()
	keys := w.byLabel[value]
	out := make([]*metav1.PartialObjectMetadata, 0, len(keys))
	for _, k := range keys {
		out = append(out, w.records[k].object(w.opts.Kind, k.namespace.Value(), k.name))
	}
	return out
}
