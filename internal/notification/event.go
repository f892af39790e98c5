package notification

import (
	"crypto/sha256"
	"encoding/binary"
	"maps"
	"slices"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Metadata keys Vidra's events carry, as Flux's do (revision, summary): the cluster an
// event is about, and how many clusters are Ready ("38 of 40").
const (
	MetaRevision      = "revision"
	MetaCluster       = "cluster"
	MetaClusters      = "clusters"
	MetaVidraResource = "vidraresource"
	MetaSummary       = "summary"
)

// alertable are the kinds an Alert may select.
var alertable = []string{"InfrahubSync", "GitSync", "OCISync", "HelmSync", "VidraResource"}

// fetched is a sync of a source that says which revision it fetched.
type fetched interface {
	Fetched() *vidrav1alpha1.SourceStatus
}

// pending is the event about regarding, in Flux's format; false when no Alert could
// select it.
func (d *Dispatcher) pending(regarding, related runtime.Object, eventType, reason, note string, metadata map[string]string) (pending, bool) {
	obj, err := meta.Accessor(regarding)
	if err != nil {
		return pending{}, false
	}
	gvk, err := apiutil.GVKForObject(regarding, d.opts.Scheme)
	if err != nil || !slices.Contains(alertable, gvk.Kind) {
		return pending{}, false
	}
	md := maps.Clone(metadata)
	if md == nil {
		md = map[string]string{}
	}
	if f, ok := regarding.(fetched); ok && md[MetaRevision] == "" {
		if src := f.Fetched(); src != nil && src.Revision != "" {
			md[MetaRevision] = src.Revision
		}
	}
	if vr, ok := related.(*vidrav1alpha1.VidraResource); ok && md[MetaVidraResource] == "" {
		md[MetaVidraResource] = vr.Name
	}
	if vr, ok := regarding.(*vidrav1alpha1.VidraResource); ok && md[MetaCluster] == "" && vr.Status.Cluster != "" {
		md[MetaCluster] = vr.Status.Cluster
	}
	severity := eventv1.EventSeverityInfo
	if eventType == corev1.EventTypeWarning {
		severity = eventv1.EventSeverityError
	}
	ev := eventv1.Event{
		InvolvedObject: corev1.ObjectReference{
			APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
			Name: obj.GetName(), UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(),
		},
		Severity:            severity,
		Timestamp:           metav1.NewTime(time.Now()),
		Message:             note,
		Reason:              reason,
		Metadata:            md,
		ReportingController: d.opts.Controller,
		ReportingInstance:   d.opts.Instance,
	}
	return pending{event: ev, labels: obj.GetLabels()}, true
}

// dedupeKey names an event sent to a provider: equal events (object, reason, severity,
// message and metadata) have equal keys.
type dedupeKey struct {
	provider string
	digest   [32]byte
}

func keyOf(provider string, ev *eventv1.Event) dedupeKey {
	h := sha256.New()
	field := func(s string) {
		_ = binary.Write(h, binary.BigEndian, uint32(len(s)))
		h.Write([]byte(s))
	}
	for _, s := range []string{ev.InvolvedObject.Kind, ev.InvolvedObject.Name, string(ev.InvolvedObject.UID), ev.Severity, ev.Reason, ev.Message} {
		field(s)
	}
	for _, k := range slices.Sorted(maps.Keys(ev.Metadata)) {
		field(k)
		field(ev.Metadata[k])
	}
	k := dedupeKey{provider: provider}
	h.Sum(k.digest[:0])
	return k
}

// seen says whether an equal event went to provider within the window, and notes this
// one; entries older than the window are swept once a window.
func (d *Dispatcher) seen(provider string, ev *eventv1.Event, now time.Time) bool {
	key := keyOf(provider, ev)
	window := d.opts.DedupeWindow
	if now.Sub(d.lastSweep) > window {
		for k, at := range d.sent {
			if now.Sub(at) > window {
				delete(d.sent, k)
			}
		}
		d.lastSweep = now
	}
	if at, ok := d.sent[key]; ok && now.Sub(at) <= window {
		return true
	}
	d.sent[key] = now
	return false
}
