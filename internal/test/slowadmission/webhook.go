// Package slowadmission is a validating admission webhook on loopback that keeps each
// ConfigMap write in one namespace waiting, as a member whose admission webhook is slow
// or hung does: what a misbehaving cluster costs the others is measured against it.
package slowadmission

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Webhook holds each ConfigMap create or update in its namespace for Delay while slow,
// and allows it.
type Webhook struct {
	server   *httptest.Server
	config   *admissionregistrationv1.ValidatingWebhookConfiguration
	slow     atomic.Bool
	delay    time.Duration
	calls    atomic.Int64
	inFlight atomic.Int64
	release  chan struct{}
	stopOnce sync.Once
}

// Start serves the webhook and registers it on the cluster c for namespace, which it
// creates if missing. It is fast until SetSlow; Start returns once the API server calls it.
func Start(ctx context.Context, c client.Client, namespace string, delay time.Duration) (*Webhook, error) {
	w := &Webhook{delay: delay, release: make(chan struct{})}
	w.server = httptest.NewTLSServer(http.HandlerFunc(w.review))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		w.server.Close()
		return nil, fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: w.server.Certificate().Raw})
	w.config = &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "slow-admission-" + namespace},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "slow.admission.test",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To(w.server.URL + "/"), CABundle: caBundle},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: namespace}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			// Past its delay a call is allowed: the webhook is slow, not refusing.
			TimeoutSeconds: ptr.To(min(int32(delay/time.Second)+5, 30)),
			FailurePolicy:  ptr.To(admissionregistrationv1.Ignore),
		}},
	}
	if err := c.Create(ctx, w.config); err != nil {
		w.server.Close()
		return nil, fmt.Errorf("register the webhook: %w", err)
	}
	// The API server calls a new webhook once its informer has it.
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "slow-admission-probe"}}
	for w.calls.Load() == 0 {
		if err := c.Create(ctx, probe.DeepCopy(), client.DryRunAll); err != nil {
			return nil, errors.Join(fmt.Errorf("probe the webhook: %w", err), w.Stop(ctx, c))
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(ctx.Err(), w.Stop(ctx, c))
		case <-time.After(100 * time.Millisecond):
		}
	}
	return w, nil
}

// SetSlow makes every call wait for the delay (true) or answer at once.
func (w *Webhook) SetSlow(slow bool) { w.slow.Store(slow) }

// InFlight is how many calls wait now.
func (w *Webhook) InFlight() int64 { return w.inFlight.Load() }

// Stop lets every waiting call go, unregisters the webhook and stops serving.
func (w *Webhook) Stop(ctx context.Context, c client.Client) error {
	w.slow.Store(false)
	w.stopOnce.Do(func() { close(w.release) })
	err := client.IgnoreNotFound(c.Delete(ctx, w.config))
	w.server.Close()
	return err
}

func (w *Webhook) review(rw http.ResponseWriter, req *http.Request) {
	w.calls.Add(1)
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(req.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(rw, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	if w.slow.Load() {
		w.inFlight.Add(1)
		select {
		case <-time.After(w.delay):
		case <-w.release:
		case <-req.Context().Done():
		}
		w.inFlight.Add(-1)
	}
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	review.Request = nil
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(review)
}
