package infrahubsync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/netutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/gitpush"
	"github.com/vidra-operator/vidra/internal/infrahub"
	"github.com/vidra-operator/vidra/internal/tracing"
)

// WebhookPath is where Infrahub's webhooks are received.
const WebhookPath = "/hooks/infrahub"

// WebhookKeyField is the data key of the webhook Secret that holds the shared key.
const WebhookKeyField = "key"

const (
	// maxWebhookBody caps a delivery's body: artifact events are well under 2 KiB.
	maxWebhookBody = 64 << 10
	// webhookTolerance refuses deliveries signed longer ago (or further ahead) than this,
	// so a captured delivery cannot be replayed later.
	webhookTolerance = 5 * time.Minute
	// seenFor is how long an event ID is remembered: longer than Infrahub's retries.
	seenFor = 30 * time.Minute
	// maxSeen bounds the memory the remembered IDs take.
	maxSeen = 10000
	// keyTTL is how long the shared key is used before it is read again, so a rotated
	// key takes effect without a restart.
	keyTTL = 10 * time.Second
	// Bounds of what anyone who reaches the port may hold before a signature is checked:
	// headers, connections, and the time a request may take to arrive.
	maxWebhookHeaderBytes = 16 << 10
	maxWebhookConnections = 64
	webhookHeaderTimeout  = 5 * time.Second
	webhookReadTimeout    = 10 * time.Second
)

// newServer is the receiver's HTTP server, its bounds set.
func (w *Receiver) newServer() *http.Server {
	return &http.Server{
		Addr: w.Addr, Handler: w.Handler(),
		MaxHeaderBytes:    maxWebhookHeaderBytes,
		ReadHeaderTimeout: webhookHeaderTimeout, ReadTimeout: webhookReadTimeout,
		// The answer waits for the syncs to be annotated, which a large fleet makes slow.
		WriteTimeout: 3 * webhookReadTimeout, IdleTimeout: webhookHeaderTimeout,
	}
}

// Receiver serves Infrahub's webhooks. A delivery with a valid signature and an artifact
// event asks every InfrahubSync it may concern for a sync, by setting the requested-at
// annotation: any replica can receive it, the one reconciling acts on it.
type Receiver struct {
	// Addr is the address to listen on.
	Addr string
	// Hub lists InfrahubSyncs (from the cache) and annotates them.
	Hub client.Client
	// Secrets reads the shared key's Secret.
	Secrets client.Reader
	// KeySecret names the Secret whose WebhookKeyField is the shared key.
	KeySecret types.NamespacedName
	// Log records refused deliveries and triggered syncs.
	Log logr.Logger
	// Metrics, when set, count deliveries by result.
	Metrics *Metrics
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// PushInterval is how often one repository's pushes may request syncs (10s when 0);
	// sooner ones wait their turn.
	PushInterval time.Duration

	mu   sync.Mutex
	seen map[string]time.Time

	paceOnce sync.Once
	pace     *gitpush.Pacer

	// The key's Secret as last read. Its own lock, never held while the API is asked.
	keyMu      sync.Mutex
	keyLast    *keyOutcome
	keyReading chan struct{} // closed when the read in flight ends; nil when none is
}

// keyOutcome is one read of the key's Secret: the key, or why there is none (the Secret
// missing, or no key in it). Both are kept for keyTTL, so a missing Secret is not asked
// for again on every delivery, which anyone could send.
type keyOutcome struct {
	key  []byte
	err  error
	read time.Time
}

// Handler serves WebhookPath.
func (w *Receiver) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(WebhookPath, w)
	mux.HandleFunc(GitPushPath, w.serveGitPush)
	return mux
}

// Start serves until ctx ends.
func (w *Receiver) Start(ctx context.Context) error {
	srv := w.newServer()
	ln, err := net.Listen("tcp", w.Addr)
	if err != nil {
		return fmt.Errorf("webhook receiver: listen on %s: %w", w.Addr, err)
	}
	// Connections past the bound wait in the kernel's queue: a flood holds no more memory
	// or goroutines than the bound allows, and signed deliveries get through as slots free.
	ln = netutil.LimitListener(ln, maxWebhookConnections)
	w.Log.Info("serving webhooks", "address", ln.Addr().String(), "paths", []string{WebhookPath, GitPushPath})
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	go w.RunWaitingPushes(ctx)
	select {
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdownCtx) //nolint:contextcheck // ctx is already done
	case err := <-errc:
		return fmt.Errorf("webhook receiver: %w", err)
	}
}

// NeedLeaderElection is false: every replica receives, since a Service picks any.
func (w *Receiver) NeedLeaderElection() bool { return false }

func (w *Receiver) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// ServeHTTP handles one delivery. Only a valid signature gets past the first checks;
// until then the answer says nothing about what the operator knows.
func (w *Receiver) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	log := w.Log.WithValues("remote", req.RemoteAddr, "webhookID", req.Header.Get(infrahub.HeaderWebhookID))
	if req.Method != http.MethodPost {
		rw.Header().Set("Allow", http.MethodPost)
		w.answer(rw, http.StatusMethodNotAllowed, "refused", "POST only")
		return
	}
	// An unsigned or stale delivery is refused before a byte of its body is read.
	if err := infrahub.CheckWebhookHeaders(req.Header, w.now(), webhookTolerance); err != nil {
		log.Info("webhook refused: signature", "reason", err.Error())
		w.answer(rw, http.StatusUnauthorized, "unauthorized", "invalid signature")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(rw, req.Body, maxWebhookBody))
	if err != nil {
		log.Info("webhook refused: body too large or unreadable", "error", err.Error())
		w.answer(rw, http.StatusRequestEntityTooLarge, "refused", "body too large")
		return
	}
	// ?infrahub= narrows the syncs a delivery triggers. Infrahub does not sign the URL,
	// so the name is bound to the signature through the key it must be signed with.
	sources := req.URL.Query()["infrahub"]
	if len(sources) > 1 {
		w.answer(rw, http.StatusBadRequest, "refused", "at most one ?infrahub=")
		return
	}
	key, err := w.sharedKey(req.Context())
	if err != nil {
		log.Error(err, "webhook refused: no shared key")
		w.answer(rw, http.StatusServiceUnavailable, "error", "webhook key unavailable")
		return
	}
	source := ""
	if len(sources) == 1 {
		source = sources[0]
		key = infrahub.SourceKey(key, source)
	}
	if err := infrahub.VerifyWebhook(key, req.Header, body, w.now(), webhookTolerance); err != nil {
		if source != "" {
			log.Info("webhook refused: signature (a delivery with ?infrahub= is signed with the key derived for that name)", "reason", err.Error(), "infrahub", source)
		} else {
			log.Info("webhook refused: signature", "reason", err.Error())
		}
		w.answer(rw, http.StatusUnauthorized, "unauthorized", "invalid signature")
		return
	}
	ev, err := infrahub.ParseWebhookEvent(body)
	if err != nil {
		log.Info("webhook refused: body", "reason", err.Error())
		w.answer(rw, http.StatusBadRequest, "refused", err.Error())
		return
	}
	log = log.WithValues("event", ev.Event, "eventID", ev.ID, "branch", ev.Branch, "artifact", ev.Data.NodeID)
	if w.wasSeen(ev.ID) {
		log.V(1).Info("webhook duplicate ignored")
		w.answer(rw, http.StatusOK, "duplicate", "duplicate event ignored")
		return
	}
	if ev.Event != infrahub.EventArtifactCreated && ev.Event != infrahub.EventArtifactUpdated {
		w.remember(ev.ID)
		w.answer(rw, http.StatusOK, "ignored", "event "+ev.Event+" is not an artifact event")
		return
	}
	// The trace of this change starts here; each sync it requests carries it on.
	ctx, span := tracing.Tracer().Start(otel.GetTextMapPropagator().Extract(req.Context(), propagation.HeaderCarrier(req.Header)), "infrahub.webhook",
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("infrahub.event", ev.Event), attribute.String("infrahub.event_id", ev.ID),
			attribute.String("infrahub.branch", ev.Branch), attribute.String("infrahub.artifact_id", ev.Data.NodeID)))
	triggered, err := w.trigger(ctx, ev, source)
	span.SetAttributes(attribute.StringSlice("vidra.infrahubsyncs", triggered))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	if err != nil {
		// Not remembered: Infrahub retries, and the retry may succeed.
		log.Error(err, "webhook: could not request syncs")
		w.answer(rw, http.StatusInternalServerError, "error", "could not request syncs")
		return
	}
	w.remember(ev.ID)
	log.Info("webhook requested syncs", "infrahubsyncs", triggered)
	w.answer(rw, http.StatusAccepted, "accepted", fmt.Sprintf("sync requested for %d InfrahubSyncs", len(triggered)))
}

func (w *Receiver) answer(rw http.ResponseWriter, code int, result, message string) {
	w.Metrics.observeWebhook(result)
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(code)
	_ = json.NewEncoder(rw).Encode(map[string]string{"message": message})
}

// trigger requests a sync of every InfrahubSync the event may concern, and returns
// their names.
func (w *Receiver) trigger(ctx context.Context, ev infrahub.WebhookEvent, source string) ([]string, error) {
	var list vidrav1alpha1.InfrahubSyncList
	if err := w.Hub.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list InfrahubSyncs: %w", err)
	}
	var concerned []vidrav1alpha1.Sync
	for i := range list.Items {
		if concerns(&list.Items[i], ev, source) {
			concerned = append(concerned, &list.Items[i])
		}
	}
	return w.request(ctx, concerned)
}

// request asks each sync for a sync now — the requested-at annotation, with ctx's trace
// for the reconcile to join — and returns the names of those asked.
func (w *Receiver) request(ctx context.Context, syncs []vidrav1alpha1.Sync) ([]string, error) {
	if len(syncs) == 0 {
		return nil, nil
	}
	body, err := tracing.AnnotationsPatch(ctx, map[string]string{vidrav1alpha1.RequestedAtAnnotation: w.now().UTC().Format(time.RFC3339Nano)})
	if err != nil {
		return nil, fmt.Errorf("request syncs: %w", err)
	}
	var requested []string
	var errs []error
	for _, sync := range syncs {
		if err := w.Hub.Patch(ctx, sync, client.RawPatch(types.MergePatchType, body)); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("request a sync of %s %s: %w", sync.SyncKind().Kind, sync.GetName(), err))
			continue
		}
		requested = append(requested, sync.GetName())
	}
	return requested, errors.Join(errs...)
}

// concerns reports whether an artifact event may change what an InfrahubSync delivers:
// same Infrahub (when the delivery says which, with a ?infrahub=<URL or host> its
// signature vouches for), same branch, a point in time that moves with now, and the
// event's artifact definition among the sync's (when the event names it; otherwise the
// sync's listing decides).
func concerns(ihs *vidrav1alpha1.InfrahubSync, ev infrahub.WebhookEvent, source string) bool {
	src := ihs.Spec.Source
	if ihs.Spec.Suspend || branchOf(ihs) != ev.Branch || !infrahub.IsRelative(src.TargetDate) {
		return false
	}
	if source != "" && !sameHost(src.InfrahubAPIURL, source) {
		return false
	}
	def := ev.Data.ArtifactDefinitionName
	if def == "" || def == src.ArtefactName {
		return true
	}
	for _, a := range ihs.Status.Artifacts {
		if a.ID == ev.Data.NodeID || a.Definition == def {
			return true
		}
	}
	return false
}

// sameHost compares the host (and port) of a URL with a URL or a bare host.
func sameHost(rawURL, hostOrURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	other := hostOrURL
	if strings.Contains(hostOrURL, "://") {
		o, err := url.Parse(hostOrURL)
		if err != nil {
			return false
		}
		other = o.Host
	}
	return strings.EqualFold(u.Host, other) || (!strings.Contains(other, ":") && strings.EqualFold(u.Hostname(), other))
}

// sharedKey returns the webhook key, or why there is none, as read at most keyTTL ago.
// One read is in flight at a time; while it is, callers use the previous outcome, or,
// when there is none yet, wait for it (or for their own ctx).
func (w *Receiver) sharedKey(ctx context.Context) ([]byte, error) {
	for {
		w.keyMu.Lock()
		last, reading := w.keyLast, w.keyReading
		if last != nil && (reading != nil || w.now().Sub(last.read) < keyTTL) {
			w.keyMu.Unlock()
			return last.key, last.err
		}
		if reading == nil {
			done := make(chan struct{})
			w.keyReading = done
			w.keyMu.Unlock()
			// Not the caller's ctx: a delivery that hangs up must not leave its
			// cancellation cached as the outcome every other delivery gets.
			readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keyTTL)
			key, err := w.readKey(readCtx)
			cancel()
			w.keyMu.Lock()
			w.keyLast, w.keyReading = &keyOutcome{key: key, err: err, read: w.now()}, nil
			w.keyMu.Unlock()
			close(done)
			return key, err
		}
		w.keyMu.Unlock()
		select {
		case <-reading:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for webhook Secret %s: %w", w.KeySecret, ctx.Err())
		}
	}
}

// readKey reads the shared key from its Secret.
func (w *Receiver) readKey(ctx context.Context) ([]byte, error) {
	secret := &corev1.Secret{}
	if err := w.Secrets.Get(ctx, w.KeySecret, secret); err != nil {
		return nil, fmt.Errorf("read webhook Secret %s: %w", w.KeySecret, err)
	}
	key := secret.Data[WebhookKeyField]
	if len(key) == 0 {
		return nil, fmt.Errorf("webhook Secret %s has no %s", w.KeySecret, WebhookKeyField)
	}
	return key, nil
}

func (w *Receiver) wasSeen(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.seen[id]
	return ok && w.now().Sub(at) < seenFor
}

// remember records an event ID, forgetting expired ones, and the oldest when full.
func (w *Receiver) remember(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if w.seen == nil {
		w.seen = map[string]time.Time{}
	}
	if len(w.seen) >= maxSeen {
		oldestID, oldest := "", now
		for k, at := range w.seen {
			if now.Sub(at) >= seenFor {
				delete(w.seen, k)
			} else if at.Before(oldest) {
				oldestID, oldest = k, at
			}
		}
		if len(w.seen) >= maxSeen {
			delete(w.seen, oldestID)
		}
	}
	w.seen[id] = now
}
