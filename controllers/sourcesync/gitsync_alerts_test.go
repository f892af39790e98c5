package sourcesync_test

import (
	"context"
	"testing"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/alertreceiver"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// alertTo has every event of the sync named name sent to a generic-hmac receiver on
// loopback, through an AlertProvider whose Secret holds the key, as a user sets it up.
func alertTo(t *testing.T, name string) *alertreceiver.Receiver {
	t.Helper()
	rcv := alertreceiver.New(t, "key-"+name, nil)
	alertThrough(t, name, vidrav1alpha1.AlertProviderGenericHMAC, rcv.URL+"/vidra", "key-"+name, rcv.URL+"/")
	return rcv
}

// alertThrough makes an AlertProvider of typ at address, whose Secret holds token and
// may go to allowed, and an Alert sending it the events of the GitSync named name; it
// waits for the Alert to be Ready.
func alertThrough(t *testing.T, name, typ, address, token, allowed string) {
	t.Helper()
	ctx := context.Background()
	createSecret(t, "alerts-"+name, map[string][]byte{"token": []byte(token)}, allowed)
	p := &vidrav1alpha1.AlertProvider{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			vidrav1alpha1.RequestedByAnnotation: "default", vidrav1alpha1.RequestedByGroupsAnnotation: "system:masters"}},
		Spec: vidrav1alpha1.AlertProviderSpec{Type: typ, Address: address,
			SecretRef: &vidrav1alpha1.LocalSecretReference{Name: "alerts-" + name}},
	}
	a := &vidrav1alpha1.Alert{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: vidrav1alpha1.AlertSpec{ProviderRef: vidrav1alpha1.ProviderReference{Name: name},
			EventSources: []vidrav1alpha1.EventSource{{Kind: "GitSync", Name: name}}},
	}
	for _, obj := range []client.Object{p, a} {
		if err := fleet.Hub.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = fleet.Hub.Client.Delete(ctx, obj) })
	}
	testfleet.Eventually(t, 30*time.Second, "Alert "+name+" Ready", func() (bool, error) {
		err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: name}, a)
		return err == nil && meta.IsStatusConditionTrue(a.Status.Conditions, vidrav1alpha1.ConditionReady), err
	})
}

// A GitSync's alerts: its revision Ready on every cluster, once; a cluster where it
// fails, named; the sync stalled.
func TestAlertsTellARevisionReadyAFailureOnAClusterAndAStall(t *testing.T) {
	const ns = "gs-alerts"
	createNamespace(t, ns)
	rcv := alertTo(t, "alerts")
	srv := gitserver.New(t)
	repo := srv.Repo(t, "alerts")
	first := repo.Commit(t, "main", map[string]string{"web.yaml": configMap("web", "v1")}, "v1")
	gs := gitSync("alerts", repo.URL(), func(gs *vidrav1alpha1.GitSync) { gs.Spec.Destination = everyMember(ns) })
	create(t, gs)
	readyAt(t, gs, "main@sha1:"+first)

	ready := rcv.WaitFor(t, "RevisionReady", alertreceiver.Reason(vidrav1alpha1.EventRevisionReady, "alerts"))
	if ready.Metadata["revision"] != "main@sha1:"+first || ready.Severity != eventv1.EventSeverityInfo ||
		ready.Message != "revision main@sha1:"+first+" Ready on 2 of 2 clusters" {
		t.Errorf("RevisionReady = %+v", ready)
	}
	rcv.WaitFor(t, "BundleAdded", alertreceiver.Reason(vidrav1alpha1.EventBundleAdded, "alerts"))

	// An object on the second member that Vidra does not manage: the new commit fails
	// there alone.
	broken := fleet.Members[1]
	unmanagedOn(t, broken, ns, "taken")
	repo.Commit(t, "main", map[string]string{"web.yaml": configMap("web", "v2"), "taken.yaml": configMap("taken", "v2")}, "v2")
	requestSync(t, gs)
	failed := rcv.WaitFor(t, "ClusterFailed", alertreceiver.Reason(vidrav1alpha1.EventClusterFailed, "alerts"))
	if failed.Metadata["cluster"] != broken.Name || failed.Severity != eventv1.EventSeverityError {
		t.Errorf("ClusterFailed = %+v, want cluster %s", failed, broken.Name)
	}

	// A Secret that is not there stalls the sync.
	update(t, gs, func() { gs.Spec.Source.SecretRef = &vidrav1alpha1.LocalSecretReference{Name: "no-such-secret"} })
	rcv.WaitFor(t, "the stall", alertreceiver.Reason(vidrav1alpha1.ReasonSourceInvalid, "alerts"))

	// Each was sent once: the reconciles in between repeated none.
	time.Sleep(2 * time.Second)
	for _, reason := range []string{vidrav1alpha1.EventRevisionReady, vidrav1alpha1.EventClusterFailed} {
		if n := rcv.Count(alertreceiver.Reason(reason, "alerts")); n != 1 {
			t.Errorf("%s sent %d times, want once: %v", reason, n, rcv.Reasons())
		}
	}
}

// notReady waits for obj's Ready condition to be False with reason, and returns its
// message.
func notReady(t *testing.T, obj interface {
	client.Object
	StatusConditions() *[]metav1.Condition
}, reason string) string {
	const status = metav1.ConditionFalse
	t.Helper()
	var msg string
	testfleet.Eventually(t, 30*time.Second, obj.GetName()+" Ready "+string(status)+" "+reason, func() (bool, error) {
		if err := fleet.Hub.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(*obj.StatusConditions(), vidrav1alpha1.ConditionReady)
		if c != nil {
			msg = c.Message
		}
		return c != nil && c.Status == status && c.Reason == reason, nil
	})
	return msg
}

// An Alert or AlertProvider that cannot be used as written says why on itself.
func TestAlertsAndProvidersSayWhyTheyCannotBeUsed(t *testing.T) {
	ctx := context.Background()
	createSecret(t, "alerts-nowhere", map[string][]byte{"token": []byte("k")}) // no allowed-urls
	stamp := map[string]string{vidrav1alpha1.RequestedByAnnotation: "default", vidrav1alpha1.RequestedByGroupsAnnotation: "system:masters"}
	unlisted := &vidrav1alpha1.AlertProvider{
		ObjectMeta: metav1.ObjectMeta{Name: "unlisted", Annotations: stamp},
		Spec: vidrav1alpha1.AlertProviderSpec{Type: vidrav1alpha1.AlertProviderGenericHMAC, Address: "https://hooks.example.com/x",
			SecretRef: &vidrav1alpha1.LocalSecretReference{Name: "alerts-nowhere"}},
	}
	github := &vidrav1alpha1.AlertProvider{
		ObjectMeta: metav1.ObjectMeta{Name: "github-later"},
		Spec:       vidrav1alpha1.AlertProviderSpec{Type: vidrav1alpha1.AlertProviderGitHub, Address: "https://github.com/org/repo"},
	}
	sources := []vidrav1alpha1.EventSource{{Kind: "GitSync"}}
	badRegex := &vidrav1alpha1.Alert{ObjectMeta: metav1.ObjectMeta{Name: "bad-regex"}, Spec: vidrav1alpha1.AlertSpec{
		ProviderRef: vidrav1alpha1.ProviderReference{Name: "unlisted"}, EventSources: sources, InclusionList: []string{"("}}}
	noProvider := &vidrav1alpha1.Alert{ObjectMeta: metav1.ObjectMeta{Name: "no-provider"}, Spec: vidrav1alpha1.AlertSpec{
		ProviderRef: vidrav1alpha1.ProviderReference{Name: "missing"}, EventSources: sources}}
	withUnreadyProvider := &vidrav1alpha1.Alert{ObjectMeta: metav1.ObjectMeta{Name: "provider-not-ready"}, Spec: vidrav1alpha1.AlertSpec{
		ProviderRef: vidrav1alpha1.ProviderReference{Name: "unlisted"}, EventSources: sources}}
	for _, obj := range []client.Object{unlisted, github, badRegex, noProvider, withUnreadyProvider} {
		if err := fleet.Hub.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = fleet.Hub.Client.Delete(ctx, obj) })
	}
	if msg := notReady(t, unlisted, vidrav1alpha1.ReasonCredentialsRefused); !containsAll(msg, "alerts-nowhere", "lists no URL") {
		t.Errorf("unlisted: %s", msg)
	}
	if msg := notReady(t, github, vidrav1alpha1.ReasonInvalidProvider); !containsAll(msg, "commit statuses") {
		t.Errorf("github: %s", msg)
	}
	if msg := notReady(t, badRegex, vidrav1alpha1.ReasonInvalidAlert); !containsAll(msg, "spec.inclusionList[0]") {
		t.Errorf("bad regex: %s", msg)
	}
	notReady(t, noProvider, vidrav1alpha1.ReasonProviderNotFound)
	notReady(t, withUnreadyProvider, vidrav1alpha1.ReasonProviderNotReady)
}

// unmanagedOn creates a ConfigMap on a member that Vidra does not manage: a bundle that
// declares it fails there.
func unmanagedOn(t *testing.T, member *testfleet.Cluster, ns, name string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"value": "mine"}}
	if err := member.Client.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
}
