package fanout_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fanout"
)

// heldCreates holds each create of a VidraResource until as many as a delivery writes at
// once are under way, and counts the most there were. The creates for cluster refused
// fail, item "a"'s only after item "b"'s: the writes end out of the items' order.
type heldCreates struct {
	client.Client
	refused string
	// patience ends the holding: the writes were never under way at once.
	patience context.Context

	mu             sync.Mutex
	inFlight, most int
	wereFull       bool
	full, bRefused chan struct{}
}

func (c *heldCreates) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.mu.Lock()
	c.inFlight++
	c.most = max(c.most, c.inFlight)
	if c.inFlight == fanout.ConcurrentWrites && !c.wereFull {
		c.wereFull = true
		close(c.full)
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.inFlight--
		c.mu.Unlock()
	}()
	held := func(ch chan struct{}) {
		select {
		case <-ch:
		case <-c.patience.Done():
		}
	}
	held(c.full)
	vr := obj.(*vidrav1alpha1.VidraResource)
	if vr.Spec.Destination.Cluster != c.refused {
		return c.Client.Create(ctx, obj, opts...)
	}
	if vr.Annotations[vidrav1alpha1.BundleIDAnnotation] == "b" {
		close(c.bRefused)
	} else {
		held(c.bRefused)
	}
	return fmt.Errorf("refused for %s", c.refused)
}

// A delivery writes VidraResources several at once, never more than its bound, and
// records what came of its items in their order, whatever order their writes end in: a
// failed write is its item's problem, and the item's other VidraResources are written.
func TestADeliveryWritesSeveralVidraResourcesAtOnceAndReportsInTheItemsOrder(t *testing.T) {
	sel := map[string]string{"suite": "concurrent"}
	for i := range 6 {
		enroll(t, fmt.Sprintf("concurrent-%d", i), sel)
	}
	src := newSource(map[string]string{"a": configMap("a", "1"), "b": configMap("b", "1")})
	h := newHarness(t, "concurrent", selecting(sel), src)
	patience, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	creates := &heldCreates{Client: hub.Client, refused: "concurrent-2", patience: patience, full: make(chan struct{}), bRefused: make(chan struct{})}
	h.cfg.Hub = creates

	d := h.round(src.items("a", "b"))
	if creates.most != fanout.ConcurrentWrites {
		t.Errorf("at most %d VidraResources written at once, want %d", creates.most, fanout.ConcurrentWrites)
	}
	problems := d.Problems()
	if len(problems) != 2 || !strings.HasPrefix(problems[0], "bundle a ") || !strings.HasPrefix(problems[1], "bundle b ") ||
		!strings.Contains(problems[0], "refused for concurrent-2") {
		t.Errorf("problems %q, want a's refused write, then b's", problems)
	}
	delivered := h.delivered()
	if len(delivered) != 10 || delivered["a/concurrent-2"] != "" || delivered["b/concurrent-5"] != configMap("b", "1") {
		t.Errorf("delivered %v, want both items to every cluster but concurrent-2", delivered)
	}
	for _, st := range h.sync.Status.Bundles {
		if len(st.VidraResources) != 6 || st.Checksum != "" || !strings.Contains(st.Message, "refused") {
			t.Errorf("status of %s: %+v, want its 6 VidraResources, no checksum delivered, and the refusal", st.ID, st)
		}
	}

	// Nothing refused, and a's content grown past what a VidraResource holds inline: the
	// five it has are updated at once to name the stored content, the sixth made.
	h.cfg.Hub = hub.Client
	large := configMap("a", strings.Repeat("x", 80<<10))
	src.set("a", large, nil)
	if d := h.round(src.items("a", "b")); len(d.Problems()) != 0 {
		t.Fatalf("problems %q", d.Problems())
	}
	delivered = h.delivered()
	if len(delivered) != 12 || delivered["a/concurrent-0"] != large || delivered["a/concurrent-2"] != large || delivered["b/concurrent-2"] != configMap("b", "1") {
		t.Errorf("%d delivered, want both items to every cluster, a's content from the store", len(delivered))
	}
}
