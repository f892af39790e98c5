// Package notification sends the events of syncs and VidraResources to the receivers
// Alerts name: each event recorded is matched against the Alerts, sent once per
// provider within a window, through a bounded queue of its provider's, with a timeout,
// retries and backoff. Nothing waits on a receiver: an event that finds a queue full is
// dropped and counted.
package notification

import (
	"context"
	"net/http"
	"sync"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	k8sevents "k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/credentials"
)

// Defaults of Options left zero.
const (
	DefaultQueueSize    = 1000
	DefaultDedupeWindow = 5 * time.Minute
	DefaultRetries      = 3
	DefaultBackoff      = time.Second
	defaultTimeout      = 15 * time.Second
)

// Options configure a Dispatcher.
type Options struct {
	// Hub reads Alerts and AlertProviders (the cache).
	Hub client.Reader
	// Gate reads the providers' Secrets; nil: providers with a Secret are not ready.
	Gate *credentials.Gate
	// Scheme names the kinds of the objects events are about.
	Scheme *runtime.Scheme
	// Recorder records SendFailed on a provider (not passed on to alerts).
	Recorder k8sevents.EventRecorder
	Metrics  *Metrics
	Log      logr.Logger
	// Controller and Instance are the events' reportingController and
	// reportingInstance.
	Controller, Instance string
	// QueueSize bounds the events waiting to be matched, and those waiting for each
	// provider.
	QueueSize int
	// DedupeWindow: an event equal to one sent to the same provider within it is not
	// sent again.
	DedupeWindow time.Duration
	// Retries after the first attempt, Backoff before the first retry (doubling).
	Retries int
	Backoff time.Duration
	// Client sends the requests; nil: one of the dispatcher's own.
	Client *http.Client
}

// Dispatcher passes events on to the Alerts that select them. It is a Notifier (package
// events) and a manager Runnable, run by every replica: each sends the events it
// records.
type Dispatcher struct {
	opts   Options
	intake chan pending

	mu sync.Mutex
	// lanes are the providers' queues, by provider name.
	lanes map[string]chan job
	// sent is when an event was last sent, by provider and event.
	sent      map[dedupeKey]time.Time
	lastSweep time.Time
	// matchers are the Alerts' compiled lists, by name and generation.
	matchers map[string]matcherAt
}

type pending struct {
	event  eventv1.Event
	labels map[string]string
}

type job struct {
	provider string
	event    eventv1.Event
}

type matcherAt struct {
	generation int64
	matcher    *Matcher
}

// New is a Dispatcher with opts, defaults filled in.
func New(opts Options) *Dispatcher {
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.DedupeWindow <= 0 {
		opts.DedupeWindow = DefaultDedupeWindow
	}
	if opts.Retries < 0 {
		opts.Retries = 0
	} else if opts.Retries == 0 {
		opts.Retries = DefaultRetries
	}
	if opts.Backoff <= 0 {
		opts.Backoff = DefaultBackoff
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	return &Dispatcher{
		opts:     opts,
		intake:   make(chan pending, opts.QueueSize),
		lanes:    map[string]chan job{},
		sent:     map[dedupeKey]time.Time{},
		matchers: map[string]matcherAt{},
	}
}

// NeedLeaderElection is false: every replica sends the events it records.
func (d *Dispatcher) NeedLeaderElection() bool { return false }

// Start matches the events recorded until ctx ends.
func (d *Dispatcher) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case p := <-d.intake:
			d.route(ctx, p)
		}
	}
}

// Notify takes an event to pass on; it never blocks: a full intake drops it.
func (d *Dispatcher) Notify(regarding, related runtime.Object, eventType, reason, note string, metadata map[string]string) {
	p, ok := d.pending(regarding, related, eventType, reason, note, metadata)
	if !ok {
		return
	}
	select {
	case d.intake <- p:
	default:
		d.opts.Metrics.observeDropped("", DroppedQueueFull)
	}
}

// route sends p to the provider of each Alert that selects it.
func (d *Dispatcher) route(ctx context.Context, p pending) {
	var alerts vidrav1alpha1.AlertList
	if err := d.opts.Hub.List(ctx, &alerts); err != nil {
		d.opts.Log.Error(err, "list Alerts: an event is not sent", "reason", p.event.Reason, "object", p.event.InvolvedObject.Name)
		return
	}
	targets := map[string]string{} // provider → summary
	for i := range alerts.Items {
		alert := &alerts.Items[i]
		if alert.Spec.Suspend || !alert.DeletionTimestamp.IsZero() {
			continue
		}
		m := d.matcher(alert)
		if m == nil || !m.Matches(&p.event, p.labels) {
			continue
		}
		if _, ok := targets[alert.Spec.ProviderRef.Name]; !ok || alert.Spec.Summary != "" {
			targets[alert.Spec.ProviderRef.Name] = alert.Spec.Summary
		}
	}
	now := time.Now()
	for provider, summary := range targets {
		ev := *p.event.DeepCopy()
		if summary != "" {
			if ev.Metadata == nil {
				ev.Metadata = map[string]string{}
			}
			ev.Metadata[MetaSummary] = summary
		}
		if d.seen(provider, &ev, now) {
			d.opts.Metrics.observeDeduplicated(provider)
			continue
		}
		d.enqueue(ctx, job{provider: provider, event: ev})
	}
}

// matcher is alert's Matcher, compiled once per generation; nil when its lists do not
// compile (its status says so).
func (d *Dispatcher) matcher(alert *vidrav1alpha1.Alert) *Matcher {
	if at, ok := d.matchers[alert.Name]; ok && at.generation == alert.Generation {
		return at.matcher
	}
	m, err := NewMatcher(alert)
	if err != nil {
		m = nil
	}
	d.matchers[alert.Name] = matcherAt{generation: alert.Generation, matcher: m}
	return m
}

// enqueue puts j on its provider's queue, started on first use; a full queue drops it.
func (d *Dispatcher) enqueue(ctx context.Context, j job) {
	d.mu.Lock()
	lane, ok := d.lanes[j.provider]
	if !ok {
		lane = make(chan job, d.opts.QueueSize)
		d.lanes[j.provider] = lane
		go d.work(ctx, lane)
	}
	d.mu.Unlock()
	select {
	case lane <- j:
	default:
		d.opts.Metrics.observeDropped(j.provider, DroppedQueueFull)
	}
}

// work sends the jobs of one provider's queue, in order, until ctx ends.
func (d *Dispatcher) work(ctx context.Context, lane chan job) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-lane:
			d.deliver(ctx, j)
		}
	}
}
