package metawatch

import (
	"context"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// member is a real API server: what a watch lists and hears is the server's.
var member *testfleet.Cluster

func TestMain(m *testing.M) {
	os.Exit(testfleet.Main(m, testfleet.Options{Members: 1}, func(f *testfleet.Fleet) { member = f.Members[0] }))
}

// heard records what a watch reports.
type heard struct {
	mu      sync.Mutex
	changes []*metav1.PartialObjectMetadata // now, nil for gone
	was     []*metav1.PartialObjectMetadata
}

func (h *heard) record(was, now *metav1.PartialObjectMetadata) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.was, h.changes = append(h.was, was), append(h.changes, now)
}

func (h *heard) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.changes)
}

func configMap(namespace, name string, labels, annotations map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels, Annotations: annotations},
		Data:       map[string]string{"k": "v"},
	}
}

func startWatch(t *testing.T, namespace string, h *heard) *Watch {
	t.Helper()
	mc, err := metadata.NewForConfig(member.Config)
	if err != nil {
		t.Fatal(err)
	}
	w := New(Options{
		Client: mc, Resource: corev1.SchemeGroupVersion.WithResource("configmaps"),
		Kind: corev1.SchemeGroupVersion.WithKind("ConfigMap"), Namespace: namespace,
		Selector: labels.SelectorFromSet(labels.Set{"watched": "yes"}),
		Keep:     Keep{Labels: []string{"watched"}, Annotations: []string{"kept"}, ManagedFields: true},
		OnChange: h.record,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	testfleet.Eventually(t, 10*time.Second, "the watch has listed", func() (bool, error) { return w.HasSynced(), nil })
	return w
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := member.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAWatchKeepsWhatItIsToldOfWhatItSelects: the watch knows the selected objects of its
// namespace as the server has them (identity, resourceVersion, managers, the labels and
// annotations it keeps) and nothing else.
func TestAWatchKeepsWhatItIsToldOfWhatItSelects(t *testing.T) {
	ctx := context.Background()
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "keeps"}}, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}})
	selected := map[string]string{"watched": "yes", "other": "label"}
	create(t,
		configMap("keeps", "before", selected, map[string]string{"kept": "1", "dropped": "2"}),
		configMap("keeps", "unselected", nil, nil),
		configMap("elsewhere", "before", selected, nil))
	h := &heard{}
	w := startWatch(t, "keeps", h)
	create(t, configMap("keeps", "after", selected, nil))

	for _, name := range []string{"before", "after"} {
		live := &metav1.PartialObjectMetadata{}
		live.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		if err := member.Client.Get(ctx, client.ObjectKey{Namespace: "keeps", Name: name}, live); err != nil {
			t.Fatal(err)
		}
		var got *metav1.PartialObjectMetadata
		testfleet.Eventually(t, 10*time.Second, "the watch has "+name, func() (bool, error) {
			var ok bool
			got, ok = w.Get("keeps", name)
			return ok, nil
		})
		if got.UID != live.UID || got.ResourceVersion != live.ResourceVersion || got.Generation != live.Generation ||
			got.GroupVersionKind() != live.GroupVersionKind() || got.Namespace != "keeps" || got.Name != name {
			t.Errorf("%s: kept %+v, live %+v", name, got.ObjectMeta, live.ObjectMeta)
		}
		if len(got.Labels) != 1 || got.Labels["watched"] != "yes" {
			t.Errorf("%s: kept labels %v, want only watched", name, got.Labels)
		}
		if want := live.Annotations["kept"]; got.Annotations["kept"] != want || len(got.Annotations) > 1 {
			t.Errorf("%s: kept annotations %v, want only kept=%q", name, got.Annotations, want)
		}
		if len(got.ManagedFields) != len(live.ManagedFields) {
			t.Fatalf("%s: kept managers %+v, live %+v", name, got.ManagedFields, live.ManagedFields)
		}
		for i, e := range live.ManagedFields {
			g := got.ManagedFields[i]
			if g.Manager != e.Manager || g.Operation != e.Operation || !g.Time.Equal(e.Time) || g.APIVersion != e.APIVersion || g.Subresource != e.Subresource {
				t.Errorf("%s: kept manager %+v, live %+v", name, g, e)
			}
		}
	}
	for _, unknown := range []struct{ namespace, name string }{{"keeps", "unselected"}, {"elsewhere", "before"}, {"keeps", "missing"}} {
		if _, ok := w.Get(unknown.namespace, unknown.name); ok {
			t.Errorf("the watch knows %s/%s", unknown.namespace, unknown.name)
		}
	}
	if n := w.Len(); n != 2 {
		t.Errorf("the watch keeps %d objects, want 2", n)
	}
	if n := h.count(); n != 0 {
		t.Errorf("objects coming into view were reported as changes: %d", n)
	}
}

// TestAWatchReportsChangesAndRemovals: a change of a watched object is reported with what
// the watch had before and what the server has now; a removal with nothing now.
func TestAWatchReportsChangesAndRemovals(t *testing.T) {
	ctx := context.Background()
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "reports"}})
	cm := configMap("reports", "changing", map[string]string{"watched": "yes"}, nil)
	create(t, cm)
	h := &heard{}
	w := startWatch(t, "reports", h)
	testfleet.Eventually(t, 10*time.Second, "the watch has the object", func() (bool, error) {
		_, ok := w.Get("reports", "changing")
		return ok, nil
	})
	was := cm.ResourceVersion
	cm.Data["k"] = "changed"
	if err := member.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, 10*time.Second, "the change is reported", func() (bool, error) { return h.count() == 1, nil })
	h.mu.Lock()
	if h.was[0].ResourceVersion != was || h.changes[0] == nil || h.changes[0].ResourceVersion != cm.ResourceVersion {
		t.Errorf("reported %+v -> %+v, want resourceVersion %s -> %s", h.was[0], h.changes[0], was, cm.ResourceVersion)
	}
	h.mu.Unlock()

	if err := member.Client.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, 10*time.Second, "the removal is reported", func() (bool, error) { return h.count() == 2, nil })
	h.mu.Lock()
	if h.changes[1] != nil || h.was[1].ResourceVersion != cm.ResourceVersion {
		t.Errorf("reported %+v -> %+v, want %s -> gone", h.was[1], h.changes[1], cm.ResourceVersion)
	}
	h.mu.Unlock()
	if _, ok := w.Get("reports", "changing"); ok {
		t.Error("the watch still has the removed object")
	}
}

// TestAWatchListedAgainReportsWhatChangedMeanwhile: when the watch could not resume and
// lists again, objects changed or gone meanwhile are reported, unchanged ones are not;
// what a list brings into view is told apart, before the watch says it has synced.
func TestAWatchListedAgainReportsWhatChangedMeanwhile(t *testing.T) {
	h := &heard{}
	var listed []string
	var w *Watch
	relisted := false
	w = New(Options{Kind: corev1.SchemeGroupVersion.WithKind("ConfigMap"), OnChange: h.record,
		OnListed: func(now *metav1.PartialObjectMetadata) {
			if !relisted && w.HasSynced() {
				t.Errorf("%s told after the first list synced the watch", now.Name)
			}
			listed = append(listed, now.Namespace+"/"+now.Name+"@"+now.ResourceVersion)
		}})
	s := (*store)(w)
	object := func(name, rv string) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("u-" + name), ResourceVersion: rv}}
		return m
	}
	if err := s.Replace([]any{object("same", "1"), object("changed", "1"), object("gone", "1")}, "1"); err != nil {
		t.Fatal(err)
	}
	if !w.HasSynced() || h.count() != 0 {
		t.Fatalf("after the first list: synced %v, %d reports", w.HasSynced(), h.count())
	}
	if slices.Sort(listed); !slices.Equal(listed, []string{"ns/changed@1", "ns/gone@1", "ns/same@1"}) {
		t.Errorf("the first list told %v, want its three objects", listed)
	}
	listed, relisted = nil, true
	if err := s.Replace([]any{object("same", "1"), object("changed", "5"), object("new", "5")}, "5"); err != nil {
		t.Fatal(err)
	}
	reported := map[string]string{}
	for i, now := range h.changes {
		rv := "gone"
		if now != nil {
			rv = now.ResourceVersion
		}
		reported[h.was[i].Name] = rv
	}
	if len(reported) != 2 || reported["changed"] != "5" || reported["gone"] != "gone" {
		t.Errorf("reported %v, want changed at 5 and gone", reported)
	}
	if _, ok := w.Get("ns", "new"); !ok {
		t.Error("the new object is not kept")
	}
	if !slices.Equal(listed, []string{"ns/new@5"}) {
		t.Errorf("the second list told %v, want the new object alone", listed)
	}
}

// TestAWatchGroupsItsObjectsByTheIndexLabel: ByLabel follows the objects as they come,
// move from one value of the index label to another, go, and are listed again.
func TestAWatchGroupsItsObjectsByTheIndexLabel(t *testing.T) {
	w := New(Options{Kind: corev1.SchemeGroupVersion.WithKind("ConfigMap"), IndexLabel: "group", Keep: Keep{Labels: []string{"group"}}})
	s := (*store)(w)
	object := func(name, group, rv string) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("u-" + name), ResourceVersion: rv}}
		if group != "" {
			m.Labels = map[string]string{"group": group}
		}
		return m
	}
	names := func(group string) []string {
		var out []string
		for _, m := range w.ByLabel(group) {
			out = append(out, m.Name)
		}
		slices.Sort(out)
		return out
	}
	for _, obj := range []*metav1.PartialObjectMetadata{object("a1", "a", "1"), object("a2", "a", "1"), object("b1", "b", "1"), object("none", "", "1")} {
		if err := s.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	if got := names("a"); !slices.Equal(got, []string{"a1", "a2"}) {
		t.Errorf("group a: %v, want a1 and a2", got)
	}
	if err := s.Update(object("a2", "b", "2")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(object("b1", "b", "2")); err != nil {
		t.Fatal(err)
	}
	if got, moved := names("a"), names("b"); !slices.Equal(got, []string{"a1"}) || !slices.Equal(moved, []string{"a2"}) {
		t.Errorf("after a2 moved to b and b1 went: a %v, b %v", got, moved)
	}
	if got := w.ByLabel("b"); len(got) != 1 || got[0].ResourceVersion != "2" || got[0].Labels["group"] != "b" {
		t.Errorf("group b holds %+v, want a2 at resourceVersion 2", got)
	}
	if err := s.Replace([]any{object("c1", "c", "3"), object("a1", "c", "3")}, "3"); err != nil {
		t.Fatal(err)
	}
	if a, b, c := names("a"), names("b"), names("c"); len(a) != 0 || len(b) != 0 || !slices.Equal(c, []string{"a1", "c1"}) {
		t.Errorf("listed again: a %v, b %v, c %v; want only c, with a1 and c1", a, b, c)
	}
}

// TestAWatchKeepsNoManagersUnlessTold: the managed fields the server sends are dropped
// unless Keep asks for them (a revision index reads none, and a fleet's revisions are many).
func TestAWatchKeepsNoManagersUnlessTold(t *testing.T) {
	object := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: "o", UID: "u", ResourceVersion: "1",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(`{"f:data":{}}`)}},
	}}
	for _, keep := range []bool{false, true} {
		w := New(Options{Kind: corev1.SchemeGroupVersion.WithKind("ConfigMap"), Keep: Keep{ManagedFields: keep}})
		if err := (*store)(w).Add(object.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		got, _ := w.Get("ns", "o")
		if kept := len(got.ManagedFields) == 1 && got.ManagedFields[0].Manager == "m"; kept != keep || len(got.ManagedFields) > 1 {
			t.Errorf("Keep.ManagedFields %v: kept %+v", keep, got.ManagedFields)
		}
	}
}
