package infrahubsync_test

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
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

const apiToken = "vidra-test-token"

// newInfrahub starts an Infrahub test double over TLS that accepts apiToken, and creates
// the Secrets an InfrahubSync needs to reach it: <prefix>-token (apiToken) and <prefix>-ca
// (its CA). Both go when the test ends.
func newInfrahub(t testing.TB, prefix string, opts infrahubtest.Options) *infrahubtest.Server {
	t.Helper()
	opts.TLS = true
	if opts.Token == "" {
		opts.Token = apiToken
	}
	s := infrahubtest.New(opts)
	t.Cleanup(s.Close)
	createSecret(t, prefix+"-token", nil, map[string][]byte{"apiToken": []byte(opts.Token)}, s.URL())
	createSecret(t, prefix+"-ca", nil, map[string][]byte{"ca.crt": s.CACertPEM()}, s.URL())
	return s
}

// createSecret creates a Secret in the operator's namespace until the test ends, which may
// be sent to the URLs allowed, as an admin would annotate it.
func createSecret(t testing.TB, name string, labels map[string]string, data map[string][]byte, allowedURLs ...string) {
	t.Helper()
	createSecretIn(t, namespace, name, labels, data, allowedURLs...)
}

// createSecretIn creates a Secret in ns until the test ends, and returns ns.
func createSecretIn(t testing.TB, ns, name string, labels map[string]string, data map[string][]byte, allowedURLs ...string) string {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}, Data: data}
	if len(allowedURLs) > 0 {
		secret.Annotations = map[string]string{vidrav1alpha1.AllowedURLsAnnotation: strings.Join(allowedURLs, ",")}
	}
	if err := fleet.Hub.Client.Create(context.Background(), secret); err != nil {
		t.Fatalf("create Secret %s/%s: %v", ns, name, err)
	}
	t.Cleanup(func() { _ = fleet.Hub.Client.Delete(context.Background(), secret) })
	return ns
}

// artifact is the content of an artifact for a site: a Namespace shared by every site's
// artifact, and a ConfigMap of its own.
func artifact(ns, site, value string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %s
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-%s
  namespace: %s
data:
  site: %s
  value: %q
`, ns, site, ns, site, value)
}

// artifactName is the name of the artifacts the tests' Infrahub renders.
const artifactName = "web"

// putSites renders the artifact for each site on branch, as Infrahub would: one artifact
// per target, IDs web-<site>.
func putSites(s *infrahubtest.Server, branch, ns, value string, sites ...string) {
	for _, site := range sites {
		s.Put(branch, infrahubtest.Artifact{
			ID: artifactName + "-" + site, Name: artifactName, Content: artifact(ns, site, value),
			TargetID: "node-" + site, TargetLabel: site, TargetKind: "InfraSite", DefinitionID: "def-web", DefinitionName: "web-definition",
		})
	}
}

// newSync creates an InfrahubSync of the artifact from s, reading with the Secrets
// newInfrahub made, delivering to dest; it is deleted when the test ends, and its
// VidraResources with it.
func newSync(t testing.TB, name, prefix string, s *infrahubtest.Server, dest vidrav1alpha1.InfrahubSyncDestination, mutate ...func(*vidrav1alpha1.InfrahubSync)) {
	t.Helper()
	ihs := &vidrav1alpha1.InfrahubSync{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: requestedBy(adminUser, adminGroup)},
		Spec: vidrav1alpha1.InfrahubSyncSpec{
			Source: vidrav1alpha1.InfrahubSyncSource{
				InfrahubAPIURL:       s.URL(),
				ArtefactName:         artifactName,
				CredentialsSecretRef: &vidrav1alpha1.SecretReference{Namespace: namespace, Name: prefix + "-token"},
				CASecretRef:          &vidrav1alpha1.SecretReference{Namespace: namespace, Name: prefix + "-ca"},
			},
			Destination: dest,
			Interval:    &metav1.Duration{Duration: time.Hour},
		},
	}
	for _, m := range mutate {
		m(ihs)
	}
	if err := fleet.Hub.Client.Create(context.Background(), ihs); err != nil {
		t.Fatalf("create InfrahubSync %s: %v", name, err)
	}
	t.Cleanup(func() { deleteSync(t, name) })
}

// The hub's admin (envtest's), whom the syncs of these tests name as their requester:
// the chart's admission policy, which would record it, is not installed here.
const (
	adminUser  = "default"
	adminGroup = "system:masters"
)

// requestedBy is who asked for a sync, as the chart's admission policy records it.
func requestedBy(user string, groups ...string) map[string]string {
	return map[string]string{
		vidrav1alpha1.RequestedByAnnotation:       user,
		vidrav1alpha1.RequestedByGroupsAnnotation: strings.Join(groups, ","),
	}
}

// deleteSync deletes an InfrahubSync and waits until the garbage collector has removed
// its VidraResources, and they their objects.
func deleteSync(t testing.TB, name string) {
	t.Helper()
	ctx := context.Background()
	ihs := &vidrav1alpha1.InfrahubSync{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := fleet.Hub.Client.Delete(ctx, ihs); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	testfleet.Eventually(t, 60*time.Second, "VidraResources of "+name+" removed", func() (bool, error) {
		var list vidrav1alpha1.VidraResourceList
		err := fleet.Hub.Client.List(ctx, &list, client.MatchingLabels{vidrav1alpha1.InfrahubSyncLabel: name})
		for _, vr := range list.Items {
			for _, ref := range vr.OwnerReferences {
				if ref.Kind == "InfrahubSync" && ref.Name == name {
					return false, err
				}
			}
		}
		return err == nil, err
	})
}

func withCluster(cluster string) vidrav1alpha1.InfrahubSyncDestination {
	return vidrav1alpha1.InfrahubSyncDestination{Destination: vidrav1alpha1.Destination{Cluster: cluster}}
}

// getSync reads an InfrahubSync.
func getSync(t testing.TB, name string) *vidrav1alpha1.InfrahubSync {
	t.Helper()
	ihs := &vidrav1alpha1.InfrahubSync{}
	if err := fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Name: name}, ihs); err != nil {
		t.Fatal(err)
	}
	return ihs
}

// updateSync changes the InfrahubSync's spec as a person would: read, change, write,
// and again when the controller's status write came in between.
func updateSync(t testing.TB, name string, change func(*vidrav1alpha1.InfrahubSync)) {
	t.Helper()
	testfleet.Edit(t, fleet.Hub.Client, &vidrav1alpha1.InfrahubSync{ObjectMeta: metav1.ObjectMeta{Name: name}}, change)
}

// syncCondition waits until the InfrahubSync's condition has status and reason for its
// current generation, and returns the InfrahubSync.
func syncCondition(t testing.TB, name, conditionType string, status metav1.ConditionStatus, reason string) *vidrav1alpha1.InfrahubSync {
	t.Helper()
	ihs := &vidrav1alpha1.InfrahubSync{}
	testfleet.Eventually(t, 30*time.Second, name+" "+conditionType+"="+string(status)+" ("+reason+")", func() (bool, error) {
		if err := fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Name: name}, ihs); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(ihs.Status.Conditions, conditionType)
		return c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == ihs.Generation, nil
	})
	return ihs
}

func syncReady(t testing.TB, name string) *vidrav1alpha1.InfrahubSync {
	t.Helper()
	return syncCondition(t, name, vidrav1alpha1.ConditionReady, metav1.ConditionTrue, vidrav1alpha1.ReasonSucceeded)
}

func readyMessage(ihs *vidrav1alpha1.InfrahubSync) string {
	if c := meta.FindStatusCondition(ihs.Status.Conditions, vidrav1alpha1.ConditionReady); c != nil {
		return c.Message
	}
	return ""
}

// resourcesOf lists the VidraResources labeled with an InfrahubSync's name, by name.
func resourcesOf(t testing.TB, sync string) []vidrav1alpha1.VidraResource {
	t.Helper()
	var list vidrav1alpha1.VidraResourceList
	if err := fleet.Hub.Client.List(context.Background(), &list, client.MatchingLabels{vidrav1alpha1.InfrahubSyncLabel: sync}); err != nil {
		t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// allReady waits until the sync has n VidraResources, all Ready, and returns them.
func allReady(t testing.TB, sync string, n int) []vidrav1alpha1.VidraResource {
	t.Helper()
	var vrs []vidrav1alpha1.VidraResource
	testfleet.Eventually(t, 60*time.Second, fmt.Sprintf("%d Ready VidraResources of %s", n, sync), func() (bool, error) {
		vrs = resourcesOf(t, sync)
		if len(vrs) != n {
			return false, nil
		}
		for _, vr := range vrs {
			c := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionReady)
			if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != vr.Generation {
				return false, nil
			}
		}
		return true, nil
	})
	return vrs
}

// configMapValue reads data.value of ConfigMap web-<site> in ns on c ("" if absent).
func configMapValue(t testing.TB, c *testfleet.Cluster, ns, site string) string {
	t.Helper()
	cm := &corev1.ConfigMap{}
	err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web-" + site}, cm)
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data["value"]
}

// waitValue waits until ConfigMap web-<site> in ns on c has data.value want ("" for
// absent).
func waitValue(t testing.TB, c *testfleet.Cluster, ns, site, want string) {
	t.Helper()
	testfleet.Eventually(t, 30*time.Second, fmt.Sprintf("ConfigMap %s/web-%s on %s with value %q", ns, site, c.Name, want), func() (bool, error) {
		return configMapValue(t, c, ns, site) == want, nil
	})
}

// downloads is vidra_artifact_downloads_total{result="ok"}.
func downloads(t testing.TB) float64 {
	t.Helper()
	return max(0, testfleet.MetricValue(t, registry, "vidra_artifact_downloads_total", map[string]string{"result": "ok"}))
}

// waitGraphQLRequests waits until Infrahub has been asked for listings atLeast times.
func waitGraphQLRequests(t testing.TB, s *infrahubtest.Server, atLeast int) {
	t.Helper()
	testfleet.Eventually(t, 30*time.Second, fmt.Sprintf("%d listings", atLeast), func() (bool, error) {
		return s.GraphQLRequests() >= atLeast, nil
	})
}

// waitEvent waits for an Event on an InfrahubSync with reason and a note containing
// every part.
func waitEvent(t testing.TB, sync, reason string, parts ...string) {
	t.Helper()
	testfleet.Eventually(t, 30*time.Second, fmt.Sprintf("Event %s on %s saying %q", reason, sync, parts), func() (bool, error) {
		var list eventsv1.EventList
		if err := fleet.Hub.Client.List(context.Background(), &list); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == "InfrahubSync" && e.Regarding.Name == sync && e.Reason == reason && containsAll(e.Note, parts...) {
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
func requestSync(t testing.TB, name string) {
	t.Helper()
	testoperator.RequestSync(t, fleet.Hub.Client, &vidrav1alpha1.InfrahubSync{ObjectMeta: metav1.ObjectMeta{Name: name}})
}
