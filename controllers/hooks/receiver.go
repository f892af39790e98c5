// Package hooks receives the notifications that ask for a sync at once, rather than at
// the sync's interval: Infrahub's signed webhooks, and Git hosts' pushes (GitHub's, or
// Vidra's own signed form). Each form is checked before its body is read and verified
// with a key derived from one shared key; the syncs it concerns get the requested-at
// annotation, which any replica may write and the one reconciling acts on.
package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/net/netutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/runtime/tracing"
	"github.com/vidra-operator/vidra/internal/source/gitpush"
)

// KeyField is the data key of the webhook Secret that holds the shared key, from which
// the key of each Infrahub (?infrahub=) and of each repository is derived.
const KeyField = "key"

const (
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

// Receiver serves Infrahub's webhooks and Git hosts' pushes. A delivery with a valid
// signature asks every sync it may concern (an InfrahubSync for an artifact event, a
// GitSync for a push) for a sync, by setting the requested-at annotation: any replica can
// receive it, the one reconciling acts on it.
type Receiver struct {
	// Addr is the address to listen on.
	Addr string
	// Hub lists syncs (from the cache) and annotates them.
	Hub client.Client
	// Secrets reads the shared key's Secret.
	Secrets client.Reader
	// KeySecret names the Secret whose KeyField is the shared key.
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

// Handler serves each form at its path: Infrahub's at InfrahubPath, pushes at GitPath.
func (w *Receiver) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(InfrahubPath, w.postOnly(w.serveInfrahub))
	mux.Handle(GitPath, w.postOnly(w.serveGitPush))
	return mux
}

// postOnly refuses every method but POST before a form's handler runs.
func (w *Receiver) postOnly(serve http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost {
			rw.Header().Set("Allow", http.MethodPost)
			w.answer(rw, http.StatusMethodNotAllowed, "refused", "POST only")
			return
		}
		serve(rw, req)
	})
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
	w.Log.Info("serving webhooks", "address", ln.Addr().String(), "paths", []string{InfrahubPath, GitPath})
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

func (w *Receiver) answer(rw http.ResponseWriter, code int, result, message string) {
	w.Metrics.observe(result)
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(code)
	_ = json.NewEncoder(rw).Encode(map[string]string{"message": message})
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

// keyOrAnswer returns the shared key, or answers that there is none.
func (w *Receiver) keyOrAnswer(rw http.ResponseWriter, req *http.Request, log logr.Logger) ([]byte, bool) {
	key, err := w.sharedKey(req.Context())
	if err != nil {
		log.Error(err, "refused: no shared key")
		w.answer(rw, http.StatusServiceUnavailable, "error", "webhook key unavailable")
		return nil, false
	}
	return key, true
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
	key := secret.Data[KeyField]
	if len(key) == 0 {
		return nil, fmt.Errorf("webhook Secret %s has no %s", w.KeySecret, KeyField)
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
