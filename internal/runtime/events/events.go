// Package events records Events on Vidra's objects with notes the events API accepts: a
// note over 1 KiB is refused, and with it the Event, so every note is cut to fit.
package events

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	k8sevents "k8s.io/client-go/tools/events"

	"github.com/vidra-operator/vidra/internal/runtime/conditions"
)

// MaxNote is the longest note the events API accepts.
const MaxNote = 1024

// Recorder records the Events of one controller's action ("Reconcile", "Sync"...).
type Recorder struct {
	recorder k8sevents.EventRecorder
	notifier Notifier
	action   string
}

// NewRecorder records through r (nil: records nothing) as action, and tells the
// Notifier r was given (WithNotifier).
func NewRecorder(r k8sevents.EventRecorder, action string) Recorder {
	return Recorder{recorder: r, notifier: notifierOf(r), action: action}
}

// Record records an Event about regarding; related, when not nil, is the object the
// Event is about within it (and keeps Events about different ones from being folded into
// one series).
func (r Recorder) Record(regarding, related runtime.Object, eventType, reason, note string) {
	r.RecordWith(regarding, related, eventType, reason, note, nil)
}

// RecordWith records as Record does, and gives the alerts that send it metadata (a
// revision, a cluster), which an Event cannot carry.
func (r Recorder) RecordWith(regarding, related runtime.Object, eventType, reason, note string, metadata map[string]string) {
	if r.recorder == nil {
		return
	}
	note = Cut(note)
	r.recorder.Eventf(regarding, related, eventType, reason, r.action, "%s", note)
	if r.notifier != nil {
		r.notifier.Notify(regarding, related, eventType, reason, note, metadata)
	}
}

// Cut is note cut to MaxNote bytes, at a character boundary.
func Cut(note string) string {
	return conditions.Cut(note, MaxNote, "...")
}

// Join joins notes into one note that fits an Event, counting those left out.
func Join(notes []string) string {
	note := notes[0]
	for i, n := range notes[1:] {
		more := fmt.Sprintf("; and %d more", len(notes)-1-i)
		if len(note)+len("; ")+len(n)+len(more) > MaxNote {
			note += more
			break
		}
		note += "; " + n
	}
	return Cut(note)
}
