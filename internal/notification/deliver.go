package notification

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/notification/sender"
	"github.com/vidra-operator/vidra/internal/runtime/events"
)

// deliver sends j through its provider, as it is now, retrying with backoff what may
// pass later; what cannot be sent is dropped, counted, logged and recorded on the
// provider.
func (d *Dispatcher) deliver(ctx context.Context, j job) {
	log := d.opts.Log.WithValues("alertProvider", j.provider, "reason", j.event.Reason,
		"kind", j.event.InvolvedObject.Kind, "name", j.event.InvolvedObject.Name)
	provider := &vidrav1alpha1.AlertProvider{}
	if err := d.opts.Hub.Get(ctx, client.ObjectKey{Name: j.provider}, provider); err != nil {
		if !apierrors.IsNotFound(err) {
			log.Error(err, "read the AlertProvider: an event is not sent")
		}
		d.opts.Metrics.observeDropped(j.provider, DroppedProviderNotReady)
		return
	}
	if provider.Spec.Suspend {
		return
	}
	s, err := Resolve(ctx, d.opts.Gate, provider)
	if err != nil {
		d.opts.Metrics.observeDropped(j.provider, DroppedProviderNotReady)
		log.Info("an event is not sent: the AlertProvider cannot be used", "why", err.Error())
		return
	}
	if err := d.send(ctx, s, provider, &j); err != nil {
		d.opts.Metrics.observeDropped(j.provider, DroppedSendFailed)
		log.Info("an event is not sent", "why", err.Error())
		note := fmt.Sprintf("%s %s of %s %s not sent: %v", j.event.Severity, j.event.Reason, j.event.InvolvedObject.Kind, j.event.InvolvedObject.Name, err)
		events.NewRecorder(d.opts.Recorder, "Send").Record(provider, nil, corev1.EventTypeWarning, vidrav1alpha1.EventSendFailed, note)
		return
	}
	d.opts.Metrics.observeSent(j.provider)
}

// send tries j, then as many retries as configured while its errors may pass later,
// each bounded by the provider's timeout.
func (d *Dispatcher) send(ctx context.Context, s sender.Sender, provider *vidrav1alpha1.AlertProvider, j *job) error {
	timeout := defaultTimeout
	if provider.Spec.Timeout != nil && provider.Spec.Timeout.Duration > 0 {
		timeout = provider.Spec.Timeout.Duration
	}
	backoff := d.opts.Backoff
	for attempt := 0; ; attempt++ {
		attemptCtx, cancel := context.WithTimeout(ctx, timeout)
		err := s.Send(attemptCtx, d.opts.Client, &j.event)
		cancel()
		if err == nil {
			return nil
		}
		if attempt >= d.opts.Retries || !sender.Retryable(err) || ctx.Err() != nil {
			if attempt > 0 {
				err = fmt.Errorf("%w (after %d attempts)", err, attempt+1)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}
