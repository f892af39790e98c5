package infrahubsync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/gitpush"
	"github.com/vidra-operator/vidra/internal/infrahub"
	"github.com/vidra-operator/vidra/internal/tracing"
)

// GitPushPath is where Git hosts' push notifications are received: GitHub's push event
// (X-Hub-Signature-256), or Vidra's own form naming a URL, signed as Infrahub's webhooks
// are; both with the key gitpush.Key derives from the shared key.
const GitPushPath = "/hooks/git"

// maxPushBody caps a push notification's body: GitHub's list the commits pushed.
const maxPushBody = 1 << 20

// serveGitPush handles one push notification: every GitSync of the repository that
// follows the pushed branch is asked for a sync at once.
func (w *Receiver) serveGitPush(rw http.ResponseWriter, req *http.Request) {
	log := w.Log.WithValues("remote", req.RemoteAddr, "path", GitPushPath)
	if req.Method != http.MethodPost {
		rw.Header().Set("Allow", http.MethodPost)
		w.answer(rw, http.StatusMethodNotAllowed, "refused", "POST only")
		return
	}
	// An unsigned notification is refused before a byte of its body is read.
	if err := checkPushHeaders(req.Header, w.now()); err != nil {
		log.Info("push refused", "reason", err.Error())
		w.answer(rw, http.StatusUnauthorized, "refused", err.Error())
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(rw, req.Body, maxPushBody))
	if err != nil {
		w.answer(rw, http.StatusRequestEntityTooLarge, "refused", "body too large")
		return
	}
	key, err := w.sharedKey(req.Context())
	if err != nil {
		log.Error(err, "push refused: no shared key")
		w.answer(rw, http.StatusServiceUnavailable, "error", "webhook key unavailable")
		return
	}
	push, id, err := w.readPush(gitpush.Key(key), req.Header, body)
	if err != nil {
		log.Info("push refused", "reason", err.Error())
		code := http.StatusUnauthorized
		if errors.Is(err, errPushBody) {
			code = http.StatusBadRequest
		}
		w.answer(rw, code, "refused", err.Error())
		return
	}
	if push.URLs == nil { // a ping
		w.answer(rw, http.StatusOK, "ignored", "not a push event")
		return
	}
	if w.wasSeen(id) {
		w.answer(rw, http.StatusOK, "duplicate", "duplicate event ignored")
		return
	}
	ctx, span := tracing.Tracer().Start(req.Context(), "git.push", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.StringSlice("git.urls", push.URLs), attribute.String("git.ref", push.Ref)))
	triggered, err := w.triggerGitSyncs(ctx, push)
	span.SetAttributes(attribute.StringSlice("vidra.gitsyncs", triggered))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	if err != nil {
		log.Error(err, "push: could not request syncs")
		w.answer(rw, http.StatusInternalServerError, "error", "could not request syncs")
		return
	}
	w.remember(id)
	log.Info("push requested syncs", "urls", push.URLs, "ref", push.Ref, "gitsyncs", triggered)
	w.answer(rw, http.StatusAccepted, "accepted", fmt.Sprintf("sync requested for %d GitSyncs", len(triggered)))
}

var errPushBody = errors.New("push body")

// readPush verifies and reads a push notification, and returns the ID that dedupes it. A
// GitHub event other than push is returned with no URLs.
func (w *Receiver) readPush(key []byte, header http.Header, body []byte) (gitpush.Push, string, error) {
	if gitpush.IsGitHub(header) {
		if err := gitpush.VerifyGitHub(key, header, body); err != nil {
			return gitpush.Push{}, "", fmt.Errorf("GitHub signature: %w", err)
		}
		if header.Get(gitpush.HeaderGitHubEvent) != "push" {
			return gitpush.Push{}, "", nil
		}
		push, err := gitpush.ParseGitHub(body)
		if err != nil {
			return gitpush.Push{}, "", fmt.Errorf("%w: %w", errPushBody, err)
		}
		// GitHub signs the body only, not its delivery ID: the body itself is what is
		// remembered, so a replayed delivery is one already seen.
		sum := sha256.Sum256(body)
		return push, "github/" + hex.EncodeToString(sum[:]), nil
	}
	if err := infrahub.VerifyWebhook(key, header, body, w.now(), webhookTolerance); err != nil {
		return gitpush.Push{}, "", fmt.Errorf("signature: %w", err)
	}
	push, err := gitpush.ParseOwn(body)
	if err != nil {
		return gitpush.Push{}, "", fmt.Errorf("%w: %w", errPushBody, err)
	}
	return push, "push/" + header.Get(infrahub.HeaderWebhookID), nil
}

// checkPushHeaders checks the signature headers of either form before the body is read.
func checkPushHeaders(header http.Header, now time.Time) error {
	if gitpush.IsGitHub(header) {
		if err := gitpush.CheckGitHubHeaders(header); err != nil {
			return fmt.Errorf("GitHub signature: %w", err)
		}
		return nil
	}
	if err := infrahub.CheckWebhookHeaders(header, now, webhookTolerance); err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	return nil
}

// triggerGitSyncs requests a sync of every GitSync the push concerns.
func (w *Receiver) triggerGitSyncs(ctx context.Context, push gitpush.Push) ([]string, error) {
	var list vidrav1alpha1.GitSyncList
	if err := w.Hub.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list GitSyncs: %w", err)
	}
	var concerned []vidrav1alpha1.Sync
	for i := range list.Items {
		gs := &list.Items[i]
		branch := ""
		if gs.Spec.Source.Ref != nil {
			branch = gs.Spec.Source.Ref.Branch
		}
		if !gs.Spec.Suspend && push.Concerns(gs.Spec.Source.URL, branch) {
			concerned = append(concerned, gs)
		}
	}
	return w.request(ctx, concerned)
}
