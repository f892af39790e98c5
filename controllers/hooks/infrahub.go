package hooks

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/runtime/tracing"
	"github.com/vidra-operator/vidra/internal/source/infrahub"
)

// InfrahubPath is where Infrahub's webhooks are received.
const InfrahubPath = "/hooks/infrahub"

// maxInfrahubBody caps a delivery's body: artifact events are well under 2 KiB.
const maxInfrahubBody = 64 << 10

// serveInfrahub handles one of Infrahub's deliveries. Only a valid signature gets past
// the first checks; until then the answer says nothing about what the operator knows.
func (w *Receiver) serveInfrahub(rw http.ResponseWriter, req *http.Request) {
	log := w.Log.WithValues("remote", req.RemoteAddr, "webhookID", req.Header.Get(infrahub.HeaderWebhookID))
	body, source, ok := w.verifiedInfrahubBody(rw, req, log)
	if !ok {
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
	triggered, err := w.triggerTraced(req, ev, source)
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

// verifiedInfrahubBody is the body of a delivery whose signature holds, and the Infrahub
// its ?infrahub= names ("" for any); when it does not hold, the delivery is answered.
func (w *Receiver) verifiedInfrahubBody(rw http.ResponseWriter, req *http.Request, log logr.Logger) ([]byte, string, bool) {
	// An unsigned or stale delivery is refused before a byte of its body is read.
	if err := infrahub.CheckWebhookHeaders(req.Header, w.now(), webhookTolerance); err != nil {
		log.Info("webhook refused: signature", "reason", err.Error())
		w.answer(rw, http.StatusUnauthorized, "unauthorized", "invalid signature")
		return nil, "", false
	}
	body, err := io.ReadAll(http.MaxBytesReader(rw, req.Body, maxInfrahubBody))
	if err != nil {
		log.Info("webhook refused: body too large or unreadable", "error", err.Error())
		w.answer(rw, http.StatusRequestEntityTooLarge, "refused", "body too large")
		return nil, "", false
	}
	// ?infrahub= narrows the syncs a delivery triggers. Infrahub does not sign the URL,
	// so the name is bound to the signature through the key it must be signed with.
	sources := req.URL.Query()["infrahub"]
	if len(sources) > 1 {
		w.answer(rw, http.StatusBadRequest, "refused", "at most one ?infrahub=")
		return nil, "", false
	}
	key, ok := w.keyOrAnswer(rw, req, log.WithValues("form", "infrahub"))
	if !ok {
		return nil, "", false
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
		return nil, "", false
	}
	return body, source, true
}

// triggerTraced is trigger in a span of its own: the trace of this change starts here,
// and each sync it requests carries it on.
func (w *Receiver) triggerTraced(req *http.Request, ev infrahub.WebhookEvent, source string) ([]string, error) {
	ctx, span := tracing.Tracer().Start(otel.GetTextMapPropagator().Extract(req.Context(), propagation.HeaderCarrier(req.Header)), "infrahub.webhook",
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("infrahub.event", ev.Event), attribute.String("infrahub.event_id", ev.ID),
			attribute.String("infrahub.branch", ev.Branch), attribute.String("infrahub.artifact_id", ev.Data.NodeID)))
	defer span.End()
	triggered, err := w.trigger(ctx, ev, source)
	span.SetAttributes(attribute.StringSlice("vidra.infrahubsyncs", triggered))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return triggered, err
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

// concerns reports whether an artifact event may change what an InfrahubSync delivers:
// same Infrahub (when the delivery says which, with a ?infrahub=<URL or host> its
// signature vouches for), same branch, a point in time that moves with now, and the
// event's artifact definition among the sync's (when the event names it; otherwise the
// sync's listing decides).
func concerns(ihs *vidrav1alpha1.InfrahubSync, ev infrahub.WebhookEvent, source string) bool {
	src := ihs.Spec.Source
	if ihs.Spec.Suspend || ihs.Branch() != ev.Branch || !infrahub.IsRelative(src.TargetDate) {
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
