package sourcesync_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

// sync is a GitSync, an OCISync or a HelmSync as the tests handle them all.
type sync interface {
	client.Object
	StatusConditions() *[]metav1.Condition
	SourceStatus() *vidrav1alpha1.SourceSyncStatus
	Options() *vidrav1alpha1.SyncOptions
}

// create creates a sync, deleted when the test ends together with its VidraResources.
func create(t testing.TB, s sync) {
	t.Helper()
	if s.Options().Interval == nil {
		s.Options().Interval = &metav1.Duration{Duration: time.Hour}
	}
	if _, ok := s.GetAnnotations()[vidrav1alpha1.RequestedByAnnotation]; !ok {
		// Who asked, as the chart's admission policy (not installed here) records it: the
		// hub's admin (envtest's), who may use every Secret.
		annotations := s.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[vidrav1alpha1.RequestedByAnnotation] = "default"
		annotations[vidrav1alpha1.RequestedByGroupsAnnotation] = "system:masters"
		s.SetAnnotations(annotations)
	}
	if err := fleet.Hub.Client.Create(context.Background(), s); err != nil {
		t.Fatalf("create %T %s: %v", s, s.GetName(), err)
	}
	t.Cleanup(func() { remove(t, s) })
}

// remove deletes a sync and waits until the garbage collector removed its VidraResources.
func remove(t testing.TB, s sync) {
	t.Helper()
	ctx := context.Background()
	if err := fleet.Hub.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	testfleet.Eventually(t, 60*time.Second, "VidraResources of "+s.GetName()+" removed", func() (bool, error) {
		var list vidrav1alpha1.VidraResourceList
		if err := fleet.Hub.Client.List(ctx, &list); err != nil {
			return false, err
		}
		for _, vr := range list.Items {
			for _, ref := range vr.OwnerReferences {
				if ref.UID == s.GetUID() {
					return false, nil
				}
			}
		}
		return true, nil
	})
}

func gitSync(name, url string, mutate ...func(*vidrav1alpha1.GitSync)) *vidrav1alpha1.GitSync {
	gs := &vidrav1alpha1.GitSync{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       vidrav1alpha1.GitSyncSpec{Source: vidrav1alpha1.GitSource{URL: url, InsecureAllowHTTP: true}},
	}
	for _, m := range mutate {
		m(gs)
	}
	return gs
}

func toCluster(cluster, ns string) vidrav1alpha1.SyncDestination {
	return vidrav1alpha1.SyncDestination{Destination: vidrav1alpha1.Destination{Cluster: cluster, Namespace: ns}}
}

// everyMember selects every enrolled cluster.
func everyMember(ns string) vidrav1alpha1.SyncDestination {
	return vidrav1alpha1.SyncDestination{
		Destination:     vidrav1alpha1.Destination{Namespace: ns},
		ClusterSelector: &metav1.LabelSelector{},
	}
}

// condition waits until the sync's condition has status and reason for its current
// generation; s is the sync as read then.
func condition(t testing.TB, s sync, conditionType string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	testfleet.Eventually(t, 60*time.Second, fmt.Sprintf("%s %s=%s (%s)", s.GetName(), conditionType, status, reason), func() (bool, error) {
		if err := fleet.Hub.Client.Get(context.Background(), client.ObjectKeyFromObject(s), s); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(*s.StatusConditions(), conditionType)
		return c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == s.GetGeneration(), nil
	})
}

func ready(t testing.TB, s sync) {
	t.Helper()
	condition(t, s, vidrav1alpha1.ConditionReady, metav1.ConditionTrue, vidrav1alpha1.ReasonSucceeded)
}

// readyAt waits until the sync is Ready with revision.
func readyAt(t testing.TB, s sync, revision string) {
	t.Helper()
	testfleet.Eventually(t, 60*time.Second, s.GetName()+" Ready at "+revision, func() (bool, error) {
		if err := fleet.Hub.Client.Get(context.Background(), client.ObjectKeyFromObject(s), s); err != nil {
			return false, err
		}
		src := s.SourceStatus().Source
		return src != nil && src.Revision == revision && meta.IsStatusConditionTrue(*s.StatusConditions(), vidrav1alpha1.ConditionReady) &&
			s.SourceStatus().ObservedGeneration == s.GetGeneration(), nil
	})
}

// readyMessage is the message of the sync's Ready condition.
func readyMessage(s sync) string {
	if c := meta.FindStatusCondition(*s.StatusConditions(), vidrav1alpha1.ConditionReady); c != nil {
		return c.Message
	}
	return ""
}

// configMap is a ConfigMap manifest with data.value.
func configMap(name, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  value: %q\n", name, value)
}

// valueOf reads data.value of a ConfigMap on c ("" when absent).
func valueOf(t testing.TB, c *testfleet.Cluster, ns, name string) string {
	t.Helper()
	return dataOf(t, c, ns, name, "value")
}

// dataOf reads a key of a ConfigMap's data on c ("" when absent).
func dataOf(t testing.TB, c *testfleet.Cluster, ns, name, key string) string {
	t.Helper()
	cm := &corev1.ConfigMap{}
	err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data[key]
}

// waitValue waits until a ConfigMap on c has data.value want.
func waitValue(t testing.TB, c *testfleet.Cluster, ns, name, want string) {
	t.Helper()
	waitData(t, c, ns, name, "value", want)
}

// waitData waits until a ConfigMap on c has want at key of its data.
func waitData(t testing.TB, c *testfleet.Cluster, ns, name, key, want string) {
	t.Helper()
	testfleet.Eventually(t, 60*time.Second, fmt.Sprintf("ConfigMap %s/%s on %s with %s %q", ns, name, c.Name, key, want), func() (bool, error) {
		return dataOf(t, c, ns, name, key) == want, nil
	})
}

// createNamespace creates a namespace on every member (a bundle's objects go into it).
func createNamespace(t testing.TB, ns string) {
	t.Helper()
	for _, m := range fleet.Members {
		if err := m.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// createSecret creates a Secret in the operator's namespace until the test ends, which may
// be sent to the URLs allowed, as an admin would annotate it.
func createSecret(t testing.TB, name string, data map[string][]byte, allowedURLs ...string) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Data: data}
	if len(allowedURLs) > 0 {
		secret.Annotations = map[string]string{vidrav1alpha1.AllowedURLsAnnotation: strings.Join(allowedURLs, ",")}
	}
	if err := fleet.Hub.Client.Create(context.Background(), secret); err != nil {
		t.Fatalf("create Secret %s: %v", name, err)
	}
	t.Cleanup(func() { _ = fleet.Hub.Client.Delete(context.Background(), secret) })
}

// resourcesOf lists the VidraResources a sync controls, by name.
func resourcesOf(t testing.TB, s sync) []vidrav1alpha1.VidraResource {
	t.Helper()
	var list vidrav1alpha1.VidraResourceList
	if err := fleet.Hub.Client.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	var out []vidrav1alpha1.VidraResource
	for _, vr := range list.Items {
		if metav1.IsControlledBy(&vr, s) {
			out = append(out, vr)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// waitEvent waits for an Event on a sync with reason and a note containing every part.
func waitEvent(t testing.TB, s sync, reason string, parts ...string) {
	t.Helper()
	testfleet.Eventually(t, 30*time.Second, fmt.Sprintf("Event %s on %s saying %q", reason, s.GetName(), parts), func() (bool, error) {
		var list eventsv1.EventList
		if err := fleet.Hub.Client.List(context.Background(), &list); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Regarding.UID == s.GetUID() && e.Reason == reason && containsAll(e.Note, parts...) {
				return true, nil
			}
		}
		return false, nil
	})
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// requestSync asks for a sync now, as a webhook (or kubectl annotate) does.
func requestSync(t testing.TB, s sync) {
	t.Helper()
	testoperator.RequestSync(t, fleet.Hub.Client, s)
}

// update changes a sync's spec as a person would: read, change, write, and again when
// the controller's status write came in between.
func update(t testing.TB, s sync, mutate func()) {
	t.Helper()
	testfleet.Edit(t, fleet.Hub.Client, s, func(sync) { mutate() })
}

// waitAsked waits until the Git server has advertised its refs for repo atLeast times.
func waitAsked(t testing.TB, srv *gitserver.Server, repo string, atLeast int) {
	t.Helper()
	testfleet.Eventually(t, 30*time.Second, fmt.Sprintf("%d ref advertisements of %s", atLeast, repo), func() (bool, error) {
		return srv.Advertisements(repo) >= atLeast, nil
	})
}
