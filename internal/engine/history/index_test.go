package history_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/engine/history"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// listCounter is the API server's reader, counting the lists made through it.
type listCounter struct {
	client.Reader
	lists atomic.Int64
}

func (c *listCounter) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.lists.Add(1)
	return c.Reader.List(ctx, list, opts...)
}

// slowWatch holds each read of a watch's stream back by lag: the index then hears late
// what is written, as it may from a busy API server.
type slowWatch struct {
	http.RoundTripper
	lag time.Duration
}

func (s slowWatch) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.RoundTripper.RoundTrip(req)
	if err == nil && req.URL.Query().Get("watch") == "true" {
		resp.Body = lagging{resp.Body, s.lag}
	}
	return resp, err
}

type lagging struct {
	io.ReadCloser
	lag time.Duration
}

func (l lagging) Read(p []byte) (int, error) {
	time.Sleep(l.lag)
	return l.ReadCloser.Read(p)
}

// indexed is a History of its own namespace read through a running index, whose watch
// hears late by lag.
func indexed(t *testing.T, lag time.Duration) (*history.History, *listCounter) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "history-"}}
	if err := hub.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(hub.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return slowWatch{rt, lag} })
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	index := history.NewIndex(mc, ns.Name)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = index.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	testfleet.Eventually(t, 10*time.Second, "the index has listed", func() (bool, error) { return index.HasSynced(), nil })
	reader := &listCounter{Reader: hub.Client}
	return &history.History{Client: hub.Client, Reader: reader, Namespace: ns.Name, Index: index}, reader
}

func vidraResource(name string) *vidrav1alpha1.VidraResource {
	return &vidrav1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uuid.NewUUID()}}
}

func configMapRef(name string) vidrav1alpha1.ManagedResource {
	return vidrav1alpha1.ManagedResource{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: name}
}

// entry delivers content naming one ConfigMap.
func entry(name string, limit int, delivered int64) history.Entry {
	manifest := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: default\n", name)
	return history.Entry{
		Body: history.Body{Manifest: manifest}, Digest: content.Digest([]byte(manifest)), Source: "user",
		Limit: limit, Delivered: delivered, Inventory: []vidrav1alpha1.ManagedResource{configMapRef(name)},
	}
}

// TestAnIndexSparesTheListsOnceItHasHeard: a VidraResource's first revision, and one
// recorded once the watch has heard the one before, are recorded without a list.
func TestAnIndexSparesTheListsOnceItHasHeard(t *testing.T) {
	ctx := context.Background()
	h, reader := indexed(t, 0)
	vr := vidraResource("spared")
	rec, err := h.Record(ctx, vr, entry("spared-a", 10, 0))
	if err != nil || rec.Number != 1 {
		t.Fatalf("revision %d, %v; want 1", rec.Number, err)
	}
	if n := reader.lists.Load(); n != 0 {
		t.Errorf("the first revision of a new VidraResource listed %d times, want 0", n)
	}
	vr.Status.Revision = 1
	// Pending lists until the watch has heard revision 1, then reads the index.
	testfleet.Eventually(t, 10*time.Second, "a read without a list", func() (bool, error) {
		before := reader.lists.Load()
		pending, err := h.Pending(ctx, vr)
		return err == nil && len(pending) == 0 && reader.lists.Load() == before, err
	})
	before := reader.lists.Load()
	next := entry("spared-b", 10, 1)
	next.PreviousResult = "Succeeded"
	rec, err = h.Record(ctx, vr, next)
	if err != nil || rec.Number != 2 {
		t.Fatalf("revision %d, %v; want 2", rec.Number, err)
	}
	if n := reader.lists.Load() - before; n != 0 {
		t.Errorf("a revision recorded once the index had heard the one before listed %d times, want 0", n)
	}
	revisions, err := h.List(ctx, vr)
	if err != nil || len(revisions) != 2 || revisions[0].Result != "Succeeded" {
		t.Errorf("revisions %+v, %v; want 1 (with its result) and 2", revisions, err)
	}
}

// TestAnIndexBehindItsOwnWritesNeverNumbersTwice: revisions recorded back to back, before
// the watch has heard the one before (it hears late here), are numbered one after another and pruned to
// the limit, as listed revisions would be.
func TestAnIndexBehindItsOwnWritesNeverNumbersTwice(t *testing.T) {
	ctx := context.Background()
	h, _ := indexed(t, 300*time.Millisecond)
	vr := vidraResource("back-to-back")
	for i := int64(1); i <= 8; i++ {
		rec, err := h.Record(ctx, vr, entry(fmt.Sprintf("back-to-back-%d", i), 2, vr.Status.Revision))
		if err != nil {
			t.Fatal(err)
		}
		if rec.Number != i {
			t.Fatalf("revision %d recorded as %d", i, rec.Number)
		}
		vr.Status.Revision = rec.Number
	}
	var list appsv1.ControllerRevisionList
	if err := hub.Client.List(ctx, &list, client.InNamespace(h.Namespace)); err != nil {
		t.Fatal(err)
	}
	var numbers []int64
	for _, cr := range list.Items {
		numbers = append(numbers, cr.Revision)
	}
	if len(numbers) != 2 || numbers[0]+numbers[1] != 15 {
		t.Errorf("revisions kept %v, want 7 and 8", numbers)
	}
}

// TestAnIndexHearsWhatAnotherProcessRecorded: a revision another process recorded (one
// stopped before writing its status) is pending as the index has it.
func TestAnIndexHearsWhatAnotherProcessRecorded(t *testing.T) {
	ctx := context.Background()
	h, reader := indexed(t, 0)
	vr := vidraResource("recorded-elsewhere")
	other := &history.History{Client: hub.Client, Reader: hub.Client, Namespace: h.Namespace}
	if _, err := other.Record(ctx, vr, entry("elsewhere-a", 10, 0)); err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, 10*time.Second, "the other process's revision pending, without a list", func() (bool, error) {
		before := reader.lists.Load()
		pending, err := h.Pending(ctx, vr)
		return err == nil && len(pending) == 1 && pending[0].Name == "elsewhere-a" && reader.lists.Load() == before, err
	})
	rec, err := h.Record(ctx, vr, entry("elsewhere-b", 10, 0))
	if err != nil || rec.Number != 2 || len(rec.Pending) != 1 {
		t.Errorf("revision %d pending %v, %v; want 2 with elsewhere-a pending", rec.Number, rec.Pending, err)
	}
}

// TestAnIndexListsRevisionsWithoutTheirNumber: a revision recorded before revisions
// carried their number in their metadata is read from a list, and numbered after.
func TestAnIndexListsRevisionsWithoutTheirNumber(t *testing.T) {
	ctx := context.Background()
	h, reader := indexed(t, 0)
	vr := vidraResource("older")
	old := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: "older-1", Namespace: h.Namespace,
			Labels: map[string]string{vidrav1alpha1.RevisionOfLabel: string(vr.UID)}},
		Data: runtime.RawExtension{Raw: []byte(`{"inventory":[]}`)}, Revision: 4,
	}
	if err := hub.Client.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	// The watch hears in order: once it has heard a revision recorded after, it has
	// heard the older one.
	after := vidraResource("after-older")
	if _, err := h.Record(ctx, after, entry("after-older", 10, 0)); err != nil {
		t.Fatal(err)
	}
	after.Status.Revision = 1
	testfleet.Eventually(t, 10*time.Second, "the watch has heard the older revision", func() (bool, error) {
		before := reader.lists.Load()
		_, err := h.Pending(ctx, after)
		return err == nil && reader.lists.Load() == before, err
	})
	before := reader.lists.Load()
	rec, err := h.Record(ctx, vr, entry("older-b", 10, 4))
	if err != nil || rec.Number != 5 {
		t.Errorf("revision %d, %v; want 5", rec.Number, err)
	}
	if reader.lists.Load() == before {
		t.Error("a revision without its number in its metadata was not listed")
	}
}
