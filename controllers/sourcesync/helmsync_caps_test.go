package sourcesync_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/helmrepo"
)

func helmSync(name, repoURL, chart string, mutate ...func(*vidrav1alpha1.HelmSync)) *vidrav1alpha1.HelmSync {
	hs := &vidrav1alpha1.HelmSync{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: vidrav1alpha1.HelmSyncSpec{
			Source: vidrav1alpha1.HelmSource{RepoURL: repoURL, Chart: chart, InsecureAllowHTTP: true},
		},
	}
	for _, m := range mutate {
		m(hs)
	}
	return hs
}

// values is a HelmSync's spec.values from JSON.
func values(json string) *apiextensionsv1.JSON {
	return &apiextensionsv1.JSON{Raw: []byte(json)}
}

// A chart from a Helm repository is rendered for each cluster as it is: a template that
// checks for an API renders one way on the member that serves it and another on the
// member that does not, with no version listed by hand; values come from a ConfigMap,
// then the sync's own, with each cluster's name put in. The chart is downloaded once for
// both clusters and a second sync.
func TestHelmChartIsRenderedForEachClusterAsItIs(t *testing.T) {
	const ns = "hs-caps"
	withWidgets, without := fleet.Members[0], fleet.Members[1]
	withWidgets.ServeKind(t, "example.vidra.dev", "Widget", apiextensionsv1.NamespaceScoped)
	repo := helmrepo.NewRepo(t)
	repo.Add(helmrepo.Chart(t, helmrepo.CapsChart, "1.0.0"))
	repo.Add(helmrepo.Chart(t, helmrepo.CapsChart, "1.1.0-rc.1")) // not stable: not the default
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "caps-values", Namespace: namespace},
		Data:       map[string]string{"values.yaml": "greeting: from-configmap\ncluster: overridden\n"},
	}
	if err := fleet.Hub.Client.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Hub.Client.Delete(context.Background(), cm) })

	hs := helmSync("caps", repo.URL(), helmrepo.CapsChart, func(hs *vidrav1alpha1.HelmSync) {
		hs.Spec.Destination = everyMember(ns) // a namespace no member has: created
		hs.Spec.ValuesFrom = []vidrav1alpha1.ValuesReference{{Kind: "ConfigMap", Name: cm.Name}}
		hs.Spec.Values = values(`{"cluster": "${cluster.name}"}`)
	})
	create(t, hs)
	readyAt(t, hs, "1.0.0")
	for _, m := range fleet.Members {
		waitData(t, m, ns, "caps-caps", "cluster", m.Name)
		for key, want := range map[string]string{"greeting": "from-configmap", "kubeVersion": "v1.36.0", "isUpgrade": "false"} {
			if got := dataOf(t, m, ns, "caps-caps", key); got != want {
				t.Errorf("%s: data.%s = %q, want %q", m.Name, key, got, want)
			}
		}
	}
	if got := dataOf(t, withWidgets, ns, "caps-caps", "hasWidgets"); got != "true" {
		t.Errorf("%s serves example.vidra.dev/v1, and the chart saw %q", withWidgets.Name, got)
	}
	if got := dataOf(t, without, ns, "caps-caps", "hasWidgets"); got != "false" {
		t.Errorf("%s does not serve example.vidra.dev/v1, and the chart saw %q", without.Name, got)
	}
	if len(hs.Status.Bundles) != 2 || hs.Status.Bundles[0].Checksum == hs.Status.Bundles[1].Checksum {
		t.Errorf("bundles %+v, want one rendering per cluster, each its own", hs.Status.Bundles)
	}

	// A second sync of the version, to one member: the chart is not downloaded again.
	other := helmSync("caps-again", repo.URL(), helmrepo.CapsChart, func(hs *vidrav1alpha1.HelmSync) {
		hs.Spec.Destination = toCluster(without.Name, ns)
		hs.Spec.Source.Version = "~1.0"
	})
	create(t, other)
	readyAt(t, other, "1.0.0")
	waitData(t, without, ns, "caps-again-caps", "greeting", "hello")
	if n := repo.ArchiveGets(); n != 1 {
		t.Errorf("the chart archive was downloaded %d times for two syncs and two clusters, want once", n)
	}

	// Values the chart's schema refuses, then a label the cluster does not have: the
	// sync says which and where, and what was delivered stays.
	update(t, hs, func() { hs.Spec.Values = values(`{"greeting": 5}`) })
	condition(t, hs, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonBuildFailed)
	if msg := readyMessage(hs); !containsAll(msg, "greeting", withWidgets.Name, without.Name) {
		t.Errorf("Ready says %q, want the schema's complaint about greeting for both clusters", msg)
	}
	update(t, hs, func() { hs.Spec.Values = values(`{"cluster": "${cluster.labels.no-such-label}"}`) })
	condition(t, hs, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonBuildFailed)
	if msg := readyMessage(hs); !containsAll(msg, "no-such-label", "cluster "+withWidgets.Name) {
		t.Errorf("Ready says %q, want the unknown label and the cluster named", msg)
	}
	waitEvent(t, hs, vidrav1alpha1.ReasonBuildFailed, "no-such-label")
	for _, m := range fleet.Members {
		if got := dataOf(t, m, ns, "caps-caps", "cluster"); got != m.Name {
			t.Errorf("%s: the delivered ConfigMap says %q, want it kept (%s)", m.Name, got, m.Name)
		}
	}

	// The label set on one member: that member renders (an upgrade now), the other still
	// cannot.
	setClusterLabel(t, without.Name, "no-such-label", "found")
	t.Cleanup(func() { setClusterLabel(t, without.Name, "no-such-label", "") })
	requestSync(t, hs)
	waitData(t, without, ns, "caps-caps", "cluster", "found")
	if got := dataOf(t, without, ns, "caps-caps", "isUpgrade"); got != "true" {
		t.Errorf("a second rendering on %s saw .Release.IsUpgrade %q, want true", without.Name, got)
	}
	condition(t, hs, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonBuildFailed)
	if msg := readyMessage(hs); strings.Contains(msg, "cluster "+without.Name+":") {
		t.Errorf("Ready says %q, and %s rendered", msg, without.Name)
	}
}
