package vidraresource

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/apply"
	"github.com/vidra-operator/vidra/internal/runtime/events"
)

func (r *Reconciler) event(vr *vidrav1alpha1.VidraResource, eventType, reason, note string) {
	events.NewRecorder(r.Recorder, "Reconcile").Record(vr, nil, eventType, reason, note)
}

// eventResults records one Normal Event for what changed (created, configured, repaired,
// released...), naming the objects by outcome, and one Warning Event per kind of failure:
// a hub write per outcome rather than per object. (The recorder would fold Events of one
// reason into a series anyway, keeping the first object's note only.)
func (r *Reconciler) eventResults(vr *vidrav1alpha1.VidraResource, results []apply.Result) {
	type outcome struct{ eventType, reason string }
	var order []outcome
	notes := map[outcome][]string{}
	add := func(eventType, reason, note string) {
		o := outcome{eventType, reason}
		if _, ok := notes[o]; !ok {
			order = append(order, o)
		}
		notes[o] = append(notes[o], note)
	}
	var changed []apply.Action
	byAction := map[apply.Action][]string{}
	for _, res := range results {
		switch {
		case res.Action == apply.Failed || res.Action == apply.NotManaged:
			add(corev1.EventTypeWarning, string(res.Action), res.Err.Error())
		case res.Action == apply.Conflicted:
			add(corev1.EventTypeWarning, vidrav1alpha1.ReasonConflict, fmt.Sprintf("%s: fields held by another owner: %v", res.Ref, res.Conflicts))
		case res.Action.Changes():
			if _, ok := byAction[res.Action]; !ok {
				changed = append(changed, res.Action)
			}
			byAction[res.Action] = append(byAction[res.Action], res.Ref.String())
		}
	}
	if len(changed) > 0 {
		// Named after the first outcome (Created, Configured, Deleted...), as one change.
		var parts []string
		for _, a := range changed {
			parts = append(parts, strings.ToLower(string(a))+" "+strings.Join(byAction[a], ", "))
		}
		r.event(vr, corev1.EventTypeNormal, string(changed[0]), events.Join(parts))
	}
	for _, o := range order {
		r.event(vr, o.eventType, o.reason, events.Join(notes[o]))
	}
}
