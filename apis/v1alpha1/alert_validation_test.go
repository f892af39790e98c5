package v1alpha1_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

func validProvider() *vidrav1alpha1.AlertProvider {
	return &vidrav1alpha1.AlertProvider{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "validation-"},
		Spec:       vidrav1alpha1.AlertProviderSpec{Type: vidrav1alpha1.AlertProviderGenericHMAC, Address: "https://hooks.example.com/vidra"},
	}
}

func validAlert() *vidrav1alpha1.Alert {
	return &vidrav1alpha1.Alert{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "validation-"},
		Spec: vidrav1alpha1.AlertSpec{
			ProviderRef:  vidrav1alpha1.ProviderReference{Name: "hooks"},
			EventSources: []vidrav1alpha1.EventSource{{Kind: "GitSync", Name: "*"}},
		},
	}
}

// An Alert or AlertProvider the operator could not use is refused at kubectl apply,
// naming the field; the defaults are those the documentation gives.
func TestAlertsAreValidatedByTheAPIServer(t *testing.T) {
	ctx := context.Background()
	refused := map[string]client.Object{
		"address must be an https:// or http:// URL": func() client.Object {
			p := validProvider()
			p.Spec.Address = "ftp://hooks.example.com"
			return p
		}(),
		"set address, or a secretRef": func() client.Object {
			p := validProvider()
			p.Spec.Address = ""
			return p
		}(),
		`Unsupported value: "pagerduty"`: func() client.Object {
			p := validProvider()
			p.Spec.Type = "pagerduty"
			return p
		}(),
		"timeout must be a duration from 1s to 5m": func() client.Object {
			p := validProvider()
			p.Spec.Timeout = &metav1.Duration{Duration: time.Hour}
			return p
		}(),
		"spec.eventSources: Invalid value": func() client.Object {
			a := validAlert()
			a.Spec.EventSources = []vidrav1alpha1.EventSource{}
			return a
		}(),
		`Unsupported value: "Deployment"`: func() client.Object {
			a := validAlert()
			a.Spec.EventSources[0].Kind = "Deployment"
			return a
		}(),
		`Unsupported value: "debug"`: func() client.Object {
			a := validAlert()
			a.Spec.EventSeverity = "debug"
			return a
		}(),
	}
	for want, obj := range refused {
		err := hub.Client.Create(ctx, obj, client.DryRunAll)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("create = %v, want Invalid saying %q", err, want)
		}
	}
	p, a := validProvider(), validAlert()
	for _, obj := range []client.Object{p, a} {
		if err := hub.Client.Create(ctx, obj, client.DryRunAll); err != nil {
			t.Fatalf("a valid %T refused: %v", obj, err)
		}
	}
	if p.Spec.Timeout == nil || p.Spec.Timeout.Duration != 15*time.Second || a.Spec.EventSeverity != vidrav1alpha1.EventSeverityInfo {
		t.Errorf("defaults: timeout %v, eventSeverity %q", p.Spec.Timeout, a.Spec.EventSeverity)
	}
}
