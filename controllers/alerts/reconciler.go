// Package alerts tells whether each Alert and AlertProvider can be used as written: a
// provider's Secret (the verb use, allowed-urls), address and type; an Alert's provider
// and expressions. The sending is internal/notification's; this is what people see in
// `kubectl get alerts,alertproviders`.
package alerts

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/credentials"
	"github.com/vidra-operator/vidra/internal/notification"
	"github.com/vidra-operator/vidra/internal/notification/sender"
	"github.com/vidra-operator/vidra/internal/runtime/conditions"
)

// Recheck is how often a provider is looked at again: its Secret, and the right to use
// it, may change without it.
const Recheck = 5 * time.Minute

// ProviderReconciler sets each AlertProvider's Ready.
type ProviderReconciler struct {
	Hub  client.Client
	Gate *credentials.Gate
}

// Reconcile checks one AlertProvider.
func (r *ProviderReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &vidrav1alpha1.AlertProvider{}
	if err := r.Hub.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := p.DeepCopy()
	_, err := notification.Resolve(ctx, r.Gate, p)
	var refusal *credentials.Refusal
	switch {
	case p.Spec.Suspend:
		conditions.MarkNotReady(p, vidrav1alpha1.ReasonSuspended, "suspended: nothing is sent")
	case errors.As(err, &refusal):
		conditions.MarkNotReady(p, refusal.Reason, refusal.Message)
	case err != nil:
		conditions.MarkNotReady(p, vidrav1alpha1.ReasonInvalidProvider, err.Error())
	default:
		conditions.MarkReady(p, vidrav1alpha1.ReasonSucceeded, "sends to "+hostOf(p.Spec.Address, p.Spec.SecretRef))
	}
	p.Status.ObservedGeneration = p.Generation
	return ctrl.Result{RequeueAfter: Recheck}, patchStatus(ctx, r.Hub, before, p, before.Status, p.Status)
}

// hostOf names where a provider sends: the address's scheme and host, or the Secret
// that holds it.
func hostOf(address string, ref *vidrav1alpha1.LocalSecretReference) string {
	if address == "" && ref != nil {
		return "the address Secret " + ref.Name + " holds"
	}
	if origin, ok := sender.Origin(address); ok {
		return origin
	}
	return "its address"
}

// AlertReconciler sets each Alert's Ready.
type AlertReconciler struct {
	Hub client.Client
}

// Reconcile checks one Alert.
func (r *AlertReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	a := &vidrav1alpha1.Alert{}
	if err := r.Hub.Get(ctx, req.NamespacedName, a); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := a.DeepCopy()
	p := &vidrav1alpha1.AlertProvider{}
	perr := r.Hub.Get(ctx, client.ObjectKey{Name: a.Spec.ProviderRef.Name}, p)
	_, merr := notification.NewMatcher(a)
	switch {
	case a.Spec.Suspend:
		conditions.MarkNotReady(a, vidrav1alpha1.ReasonSuspended, "suspended: nothing is sent")
	case merr != nil:
		conditions.MarkNotReady(a, vidrav1alpha1.ReasonInvalidAlert, merr.Error())
	case apierrors.IsNotFound(perr):
		conditions.MarkNotReady(a, vidrav1alpha1.ReasonProviderNotFound, "AlertProvider "+a.Spec.ProviderRef.Name+" not found")
	case perr != nil:
		return ctrl.Result{}, fmt.Errorf("get AlertProvider %s: %w", a.Spec.ProviderRef.Name, perr)
	case !conditions.IsReady(p):
		conditions.MarkNotReady(a, vidrav1alpha1.ReasonProviderNotReady, "AlertProvider "+p.Name+" is not Ready")
	default:
		conditions.MarkReady(a, vidrav1alpha1.ReasonSucceeded, fmt.Sprintf("sends %s events of %d sources to AlertProvider %s",
			a.Spec.EventSeverity, len(a.Spec.EventSources), p.Name))
	}
	a.Status.ObservedGeneration = a.Generation
	return ctrl.Result{}, patchStatus(ctx, r.Hub, before, a, before.Status, a.Status)
}

func patchStatus(ctx context.Context, hub client.Client, before, obj client.Object, was, is vidrav1alpha1.AlertStatus) error {
	if apiequality.Semantic.DeepEqual(was, is) {
		return nil
	}
	if err := hub.Status().Patch(ctx, obj, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patch status of %s: %w", obj.GetName(), err)
	}
	return nil
}

// SetupWithManager registers both reconcilers; an Alert is looked at again when its
// provider changes.
func SetupWithManager(mgr ctrl.Manager, providers *ProviderReconciler, alerts *AlertReconciler) error {
	if err := ctrl.NewControllerManagedBy(mgr).Named("alertprovider").
		For(&vidrav1alpha1.AlertProvider{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(providers); err != nil {
		return fmt.Errorf("set up the AlertProvider controller: %w", err)
	}
	byProvider := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		var list vidrav1alpha1.AlertList
		if err := alerts.Hub.List(ctx, &list); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, a := range list.Items {
			if a.Spec.ProviderRef.Name == obj.GetName() {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: a.Name}})
			}
		}
		return out
	})
	if err := ctrl.NewControllerManagedBy(mgr).Named("alert").
		For(&vidrav1alpha1.Alert{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&vidrav1alpha1.AlertProvider{}, byProvider).
		Complete(alerts); err != nil {
		return fmt.Errorf("set up the Alert controller: %w", err)
	}
	return nil
}
