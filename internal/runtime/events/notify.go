package events

import (
	"k8s.io/apimachinery/pkg/runtime"
	k8sevents "k8s.io/client-go/tools/events"
)

// Notifier is told of each Event a Recorder records, to pass on to the Alerts that
// select it. It must not block: it is called on the reconcile's path.
type Notifier interface {
	Notify(regarding, related runtime.Object, eventType, reason, note string, metadata map[string]string)
}

// notifying is an EventRecorder whose Recorders also tell a Notifier.
type notifying struct {
	k8sevents.EventRecorder
	notifier Notifier
}

// WithNotifier is r, whose Recorders (NewRecorder) also tell n of what they record.
func WithNotifier(r k8sevents.EventRecorder, n Notifier) k8sevents.EventRecorder {
	if n == nil {
		return r
	}
	return notifying{EventRecorder: r, notifier: n}
}

// notifierOf is the Notifier r was given, if any.
func notifierOf(r k8sevents.EventRecorder) Notifier {
	if n, ok := r.(notifying); ok {
		return n.notifier
	}
	return nil
}
