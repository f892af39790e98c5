package vmrollout_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/runtime/tracing"
	"github.com/vidra-operator/vidra/internal/test/otlptest"
)

// The VM restarts a change causes join that change's trace, carried on the VidraResource
// as the InfrahubSync writes it.
func TestVMRestartsJoinTheTraceOfTheirChange(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	otlptest.UseProvider(t, sdktrace.WithSyncer(spans))

	startOperator(t)
	member := fleet.Members[0]
	const ns = "traced"
	before, after := vms(2, "64Mi"), vms(2, "128Mi")
	deliverVMs(t, "traced", member, ns, before, &vidrav1alpha1.VMRolloutSpec{Strategy: vidrav1alpha1.VMRolloutImmediate})
	allRunning(t, member, ns, before)

	// The change, as the sync writes it: new content with its trace context.
	const traceID, spanID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{tracing.TraceparentAnnotation: "00-" + traceID + "-" + spanID + "-01"}},
		"spec":     map[string]any{"manifest": manifestOf(after)},
	})
	if err != nil {
		t.Fatal(err)
	}
	vr := &vidrav1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: "traced"}}
	if err := fleet.Hub.Client.Patch(context.Background(), vr, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	rollout(t, "traced", metav1.ConditionTrue, vidrav1alpha1.ReasonSucceeded, 60*time.Second)

	// A restart issued again (its VM did not come back in time) has a span of its own:
	// what counts is that every VM's restart is in the change's trace.
	restarted := map[string]bool{}
	for _, s := range spans.GetSpans() {
		if s.Name != "vm.restart" {
			continue
		}
		for _, a := range s.Attributes {
			if a.Key == "vidra.vm" {
				restarted[a.Value.AsString()] = true
			}
		}
		if s.SpanContext.TraceID().String() != traceID || s.Parent.SpanID().String() != spanID {
			t.Errorf("span vm.restart in trace %s with parent %s, want trace %s, parent %s", s.SpanContext.TraceID(), s.Parent.SpanID(), traceID, spanID)
		}
	}
	for _, vm := range after {
		if !restarted[ns+"/"+vm.name] {
			t.Errorf("no vm.restart span for %s (spans for %v)", vm.name, restarted)
		}
	}
	if len(restarted) != len(after) {
		t.Errorf("vm.restart spans for %v, want one per VM (%d)", restarted, len(after))
	}
}
