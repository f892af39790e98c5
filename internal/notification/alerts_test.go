package notification_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/credentials"
	"github.com/vidra-operator/vidra/internal/notification"
	"github.com/vidra-operator/vidra/internal/test/alertreceiver"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// An Alert sends the events of what it selects, at its severity, filtered by its lists,
// signed, with Flux's payload; an equal event within the window is sent once.
func TestAnAlertSendsWhatItSelectsOnceWithinTheWindow(t *testing.T) {
	in := alertreceiver.New(t, "hmac-key", nil)
	provider(t, "hooks", vidrav1alpha1.AlertProviderGenericHMAC, in.URL+"/vidra", map[string]string{"token": "hmac-key"}, in.URL+"/")
	alert(t, "web", vidrav1alpha1.AlertSpec{
		ProviderRef:   vidrav1alpha1.ProviderReference{Name: "hooks"},
		EventSources:  []vidrav1alpha1.EventSource{{Kind: "GitSync", Name: "web"}, {Kind: "GitSync", MatchLabels: map[string]string{"team": "a"}}},
		EventSeverity: vidrav1alpha1.EventSeverityInfo,
		ExclusionList: []string{"^ignored"},
		Summary:       "web in production",
	})
	d, reg := start(t, notification.Options{})

	web, teamA, other := gitSync("web", nil), gitSync("api", map[string]string{"team": "a"}), gitSync("db", nil)
	d.Notify(web, nil, corev1.EventTypeNormal, vidrav1alpha1.EventBundleAdded, "GitSync web delivered", nil)
	d.Notify(web, nil, corev1.EventTypeNormal, vidrav1alpha1.EventBundleAdded, "GitSync web delivered", nil) // equal: once
	d.Notify(web, nil, corev1.EventTypeNormal, vidrav1alpha1.EventBundleAdded, "ignored by the exclusion list", nil)
	d.Notify(other, nil, corev1.EventTypeWarning, vidrav1alpha1.EventClusterFailed, "GitSync db failed", nil) // not selected
	d.Notify(teamA, nil, corev1.EventTypeWarning, vidrav1alpha1.EventClusterFailed, "GitSync api failed on cluster edge-1: ApplyFailed: x",
		map[string]string{notification.MetaCluster: "edge-1"})
	got := waitFor(t, in, 2)
	time.Sleep(500 * time.Millisecond) // nothing more comes
	if r := in.Reasons(); !slices.Equal(r, []string{vidrav1alpha1.EventBundleAdded, vidrav1alpha1.EventClusterFailed}) {
		t.Fatalf("received %v, want BundleAdded then ClusterFailed", r)
	}
	first, failed := got[0], got[1]
	if first.InvolvedObject.Kind != "GitSync" || first.InvolvedObject.Name != "web" || first.Severity != "info" ||
		first.Metadata[notification.MetaRevision] != web.Status.Source.Revision || first.Metadata["summary"] != "web in production" ||
		first.ReportingController != "vidra" || first.InvolvedObject.APIVersion != "infrahub.operators.com/v1alpha1" {
		t.Errorf("first event = %+v", first)
	}
	if failed.Severity != "error" || failed.Metadata[notification.MetaCluster] != "edge-1" || failed.InvolvedObject.Name != "api" {
		t.Errorf("failure = %+v", failed)
	}
	if n := testfleet.MetricValue(t, reg, "vidra_alerts_deduplicated_total", map[string]string{"provider": "hooks"}); n != 1 {
		t.Errorf("deduplicated = %v, want 1", n)
	}
	if n := testfleet.MetricValue(t, reg, "vidra_alerts_sent_total", map[string]string{"provider": "hooks"}); n != 2 {
		t.Errorf("sent = %v, want 2", n)
	}
}

// An Alert of severity error sends failures alone.
func TestAnErrorAlertSendsFailuresAlone(t *testing.T) {
	in := alertreceiver.New(t, "", nil)
	provider(t, "errors-only", vidrav1alpha1.AlertProviderGeneric, in.URL, nil, "")
	alert(t, "errors-only", vidrav1alpha1.AlertSpec{
		ProviderRef:   vidrav1alpha1.ProviderReference{Name: "errors-only"},
		EventSources:  []vidrav1alpha1.EventSource{{Kind: "GitSync", Name: "*"}},
		EventSeverity: vidrav1alpha1.EventSeverityError,
	})
	d, _ := start(t, notification.Options{})
	gs := gitSync("severity", nil)
	d.Notify(gs, nil, corev1.EventTypeNormal, vidrav1alpha1.EventRevisionReady, "revision main Ready on 2 of 2 clusters", nil)
	d.Notify(gs, nil, corev1.EventTypeWarning, vidrav1alpha1.ReasonFetchFailed, "unreachable", nil)
	waitFor(t, in, 1)
	time.Sleep(500 * time.Millisecond)
	if r := in.Reasons(); !slices.Equal(r, []string{vidrav1alpha1.ReasonFetchFailed}) {
		t.Errorf("received %v, want the failure alone", r)
	}
}

// A receiver that is slow, failing or refusing holds nothing: Notify never waits, the
// events past the queue are dropped and counted, others' receivers get theirs, a 500 is
// retried, a 400 is not.
func TestASlowOrFailingReceiverHoldsNothing(t *testing.T) {
	slow := alertreceiver.New(t, "", func(int) (int, time.Duration) { return 200, 3 * time.Second })
	flaky := alertreceiver.New(t, "", func(n int) (int, time.Duration) {
		if n <= 2 {
			return 500, 0
		}
		return 200, 0
	})
	refusing := alertreceiver.New(t, "", func(int) (int, time.Duration) { return 400, 0 })
	for name, in := range map[string]*alertreceiver.Receiver{"slow": slow, "flaky": flaky, "refusing": refusing} {
		provider(t, name, vidrav1alpha1.AlertProviderGeneric, in.URL, nil, "")
		alert(t, name, vidrav1alpha1.AlertSpec{
			ProviderRef:  vidrav1alpha1.ProviderReference{Name: name},
			EventSources: []vidrav1alpha1.EventSource{{Kind: "GitSync", Name: name}},
		})
	}
	d, reg := start(t, notification.Options{QueueSize: 4, Backoff: 50 * time.Millisecond})
	began := time.Now()
	d.Notify(gitSync("flaky", nil), nil, corev1.EventTypeNormal, vidrav1alpha1.EventRevisionReady, "ready", nil)
	d.Notify(gitSync("refusing", nil), nil, corev1.EventTypeNormal, vidrav1alpha1.EventRevisionReady, "ready", nil)
	for i := range 40 {
		d.Notify(gitSync("slow", nil), nil, corev1.EventTypeNormal, vidrav1alpha1.EventBundleUpdated, "update "+strings.Repeat("!", i), nil)
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("Notify took %v for 42 events: it must never wait on a receiver", took)
	}
	waitFor(t, flaky, 1) // after two 500s, retried
	testfleet.Eventually(t, 20*time.Second, "the events past the slow provider's queue dropped, the refused one too", func() (bool, error) {
		full := testfleet.MetricValue(t, reg, "vidra_alerts_dropped_total", map[string]string{"reason": notification.DroppedQueueFull})
		refused := testfleet.MetricValue(t, reg, "vidra_alerts_dropped_total", map[string]string{"provider": "refusing", "reason": notification.DroppedSendFailed})
		return full > 0 && refused == 1, nil
	})
	if n := len(refusing.Reasons()); n != 0 {
		t.Errorf("the refusing receiver kept %d events", n)
	}
}

// A provider's Secret is used only as the gate allows it: for the URLs it lists; a
// Slack webhook's URL in the Secret is never shown in a refusal.
func TestAProvidersSecretIsUsedOnlyForTheURLsItLists(t *testing.T) {
	ctx := context.Background()
	gate := credentials.NewGate(hub.Client, hub.Client, namespace)
	provider(t, "slack-elsewhere", vidrav1alpha1.AlertProviderSlack, "",
		map[string]string{"address": "https://hooks.slack.com/services/T0/B0/SECRETPATH"}, "https://chat.example.com/")
	p := &vidrav1alpha1.AlertProvider{}
	if err := hub.Client.Get(ctx, keyOf("slack-elsewhere"), p); err != nil {
		t.Fatal(err)
	}
	_, err := notification.Resolve(ctx, gate, p)
	var refusal *credentials.Refusal
	if !errors.As(err, &refusal) || refusal.Reason != vidrav1alpha1.ReasonCredentialsRefused {
		t.Fatalf("a Secret whose URLs do not cover its address: %v", err)
	}
	if strings.Contains(refusal.Message, "SECRETPATH") || !strings.Contains(refusal.Message, "https://hooks.slack.com/...") {
		t.Errorf("the refusal shows the webhook's URL: %s", refusal.Message)
	}
	provider(t, "hmac-without-token", vidrav1alpha1.AlertProviderGenericHMAC, "https://hooks.example.com/x", map[string]string{"other": "x"}, "https://hooks.example.com/")
	if err := hub.Client.Get(ctx, keyOf("hmac-without-token"), p); err != nil {
		t.Fatal(err)
	}
	if _, err := notification.Resolve(ctx, gate, p); err == nil || !strings.Contains(err.Error(), "token") {
		t.Errorf("generic-hmac without a token: %v", err)
	}
}
