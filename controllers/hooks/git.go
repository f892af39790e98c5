package hooks

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
	"github.com/vidra-operator/vidra/internal/runtime/tracing"
	"github.com/vidra-operator/vidra/internal/source/gitpush"
	"github.com/vidra-operator/vidra/internal/source/infrahub"
)

// GitPath is where Git hosts' push notifications are received: GitHub's push event
// (X-Hub-Signature-256), or Vidra's own form naming a URL, signed as Infrahub's webhooks
// are; both with the key gitpush.Key derives from the shared key for their repository.
const GitPath = "/hooks/git"

const (
	// maxPushBody caps a push notification's body: GitHub's list the commits pushed.
	maxPushBody = 1 << 20
	// defaultPushInterval is how often one repository's pushes may request syncs.
	defaultPushInterval = 10 * time.Second
)

// serveGitPush handles one push notification: every GitSync of the repository that
// follows the pushed branch is asked for a sync at once.
func (w *Receiver) serveGitPush(rw http.ResponseWriter, req *http.Request) {
	log := w.Log.WithValues("remote", req.RemoteAddr, "path", GitPath)
	// An unsigned notification is refused before a byte of its body is read.
	form := pushFormOf(req.Header)
	if err := form.checkHeaders(req.Header, w.now()); err != nil {
		log.Info("push refused", "reason", err.Error())
		w.answer(rw, http.StatusUnauthorized, "refused", err.Error())
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(rw, req.Body, maxPushBody))
	if err != nil {
		w.answer(rw, http.StatusRequestEntityTooLarge, "refused", "body too large")
		return
	}
	key, ok := w.keyOrAnswer(rw, req, log.WithValues("form", "git"))
	if !ok {
		return
	}
	push, id, err := form.read(key, req.Header, body, w.now())
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
	if admitted, at := w.pacer().Admit(push, w.now()); !admitted {
		w.remember(id)
		log.Info("push waits for its repository's turn", "repository", push.Repository, "ref", push.Ref, "at", at)
		w.answer(rw, http.StatusAccepted, "deferred", fmt.Sprintf("syncs of %s requested at %s: one request per repository every %s",
			push.Repository, at.UTC().Format(time.RFC3339), w.pushInterval()))
		return
	}
	triggered, err := w.requestPush(req.Context(), push)
	if err != nil {
		log.Error(err, "push: could not request syncs")
		w.answer(rw, http.StatusInternalServerError, "error", "could not request syncs")
		return
	}
	w.remember(id)
	log.Info("push requested syncs", "urls", push.URLs, "ref", push.Ref, "gitsyncs", triggered)
	w.answer(rw, http.StatusAccepted, "accepted", fmt.Sprintf("sync requested for %d GitSyncs", len(triggered)))
}

// requestPush requests a sync of every GitSync the push concerns, traced.
func (w *Receiver) requestPush(ctx context.Context, push gitpush.Push) ([]string, error) {
	ctx, span := tracing.Tracer().Start(ctx, "git.push", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.StringSlice("git.urls", push.URLs), attribute.String("git.ref", push.Ref)))
	defer span.End()
	triggered, err := w.triggerGitSyncs(ctx, push)
	span.SetAttributes(attribute.StringSlice("vidra.gitsyncs", triggered))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return triggered, err
}

var errPushBody = errors.New("push body")

// A pushForm is one form of push notification: GitHub's push event, or Vidra's own form,
// signed as Infrahub's webhooks are. Each is signed with the key gitpush.Key derives from
// the shared key for the repository it names.
type pushForm interface {
	// checkHeaders checks the signature's headers, before the body is read.
	checkHeaders(header http.Header, now time.Time) error
	// read reads and verifies a notification, and returns the ID that dedupes it; an
	// event other than a push is returned with no URLs.
	read(shared []byte, header http.Header, body []byte, now time.Time) (gitpush.Push, string, error)
}

// pushFormOf is the form a notification's headers say it has.
func pushFormOf(header http.Header) pushForm {
	if gitpush.IsGitHub(header) {
		return gitHubPush{}
	}
	return signedPush{}
}

// gitHubPush is GitHub's push event, signed with X-Hub-Signature-256.
type gitHubPush struct{}

func (gitHubPush) checkHeaders(header http.Header, _ time.Time) error {
	if err := gitpush.CheckGitHubHeaders(header); err != nil {
		return fmt.Errorf("GitHub signature: %w", err)
	}
	return nil
}

// read reads the body before its signature is checked: the repository it names says which
// key signs it.
func (gitHubPush) read(shared []byte, header http.Header, body []byte, now time.Time) (gitpush.Push, string, error) {
	push, err := gitpush.ParseGitHub(body)
	if err != nil {
		return gitpush.Push{}, "", fmt.Errorf("%w: %w", errPushBody, err)
	}
	if err := gitpush.VerifyGitHub(gitpush.Key(shared, push.Repository), header, body); err != nil {
		return gitpush.Push{}, "", fmt.Errorf("GitHub signature (signed with the key of repository %s): %w", push.Repository, err)
	}
	if header.Get(gitpush.HeaderGitHubEvent) != "push" {
		return gitpush.Push{}, "", nil
	}
	// GitHub signs neither a timestamp nor its delivery ID: the body is what is
	// remembered, for seenFor, and a push older than that is a replay.
	if age := now.Sub(push.PushedAt); !push.PushedAt.IsZero() && (age > seenFor || age < -webhookTolerance) {
		return gitpush.Push{}, "", fmt.Errorf("pushed at %s, not within %s of now: a replay", push.PushedAt.UTC().Format(time.RFC3339), seenFor)
	}
	sum := sha256.Sum256(body)
	return push, "github/" + hex.EncodeToString(sum[:]), nil
}

// signedPush is Vidra's own form, naming a URL and a ref, signed as Infrahub's webhooks
// are.
type signedPush struct{}

func (signedPush) checkHeaders(header http.Header, now time.Time) error {
	if err := infrahub.CheckWebhookHeaders(header, now, webhookTolerance); err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	return nil
}

func (signedPush) read(shared []byte, header http.Header, body []byte, now time.Time) (gitpush.Push, string, error) {
	push, err := gitpush.ParseOwn(body)
	if err != nil {
		return gitpush.Push{}, "", fmt.Errorf("%w: %w", errPushBody, err)
	}
	if err := infrahub.VerifyWebhook(gitpush.Key(shared, push.Repository), header, body, now, webhookTolerance); err != nil {
		return gitpush.Push{}, "", fmt.Errorf("signature (signed with the key of repository %s): %w", push.Repository, err)
	}
	return push, "push/" + header.Get(infrahub.HeaderWebhookID), nil
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

// RunWaitingPushes requests the syncs of pushes that waited for their repository's turn,
// as their turns come, until ctx ends. Start runs it.
func (w *Receiver) RunWaitingPushes(ctx context.Context) {
	tick := time.NewTicker(min(time.Second, w.pushInterval()))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, push := range w.pacer().Due(w.now()) {
			triggered, err := w.requestPush(ctx, push)
			if err != nil {
				w.Log.Error(err, "push: could not request syncs; tried again at the repository's next turn", "repository", push.Repository)
				w.pacer().Wait(push, w.now())
				continue
			}
			w.Log.Info("push requested syncs in its turn", "urls", push.URLs, "ref", push.Ref, "gitsyncs", triggered)
		}
	}
}

func (w *Receiver) pushInterval() time.Duration {
	if w.PushInterval > 0 {
		return w.PushInterval
	}
	return defaultPushInterval
}

// pacer is the receiver's Pacer, made on first use.
func (w *Receiver) pacer() *gitpush.Pacer {
	w.paceOnce.Do(func() { w.pace = &gitpush.Pacer{Interval: w.pushInterval(), MaxRepositories: maxSeen} })
	return w.pace
}
