package sourcesync_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
	"github.com/vidra-operator/vidra/internal/test/ociregistry"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// settings is a ConfigMap that names the sync's variables and a label of its cluster.
const settings = `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  region: ${region}
  replicas: "${replicas}"
  password: ${password}
  ring: ${cluster.labels.ring}
  tier: ${tier:=standard}
  literal: $${region}
`

// script is an object whose ${…} are its own, which substitution leaves alone.
const script = `apiVersion: v1
kind: ConfigMap
metadata:
  name: script
  annotations:
    kustomize.toolkit.fluxcd.io/substitute: disabled
data:
  run.sh: echo ${HOME}
`

// A GitSync's spec.postBuild puts its variables, and each cluster's labels, in what it
// delivers there: clusters whose variables are equal share one build, a label changed on
// one cluster rebuilds that cluster's alone, an object annotated substitute: disabled is
// left as written, and a label a cluster lacks stops that cluster, by name, keeping what
// it had there while the others go on.
func TestPostBuildSubstitutesEachClustersVariables(t *testing.T) {
	const ns = "gs-postbuild"
	createNamespace(t, ns)
	first, second := fleet.Members[0], fleet.Members[1]
	labelCluster(t, first, map[string]string{"ring": "blue", "zone": "a"})
	labelCluster(t, second, map[string]string{"ring": "blue", "zone": "b"})
	createConfigMap(t, "pb-vars", map[string]string{"region": "eu-west", "replicas": "2"})
	createSecret(t, "pb-secret", map[string][]byte{"password": []byte("s3cret")})
	srv := gitserver.New(t)
	repo := srv.Repo(t, "postbuild")
	repo.Commit(t, "main", map[string]string{"deploy/settings.yaml": settings, "deploy/script.yaml": script}, "settings")
	gs := gitSync("postbuild", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Source.Path = "deploy"
		gs.Spec.Destination = everyMember(ns)
		gs.Spec.PostBuild = &vidrav1alpha1.PostBuild{
			Substitute: map[string]string{"region": "eu-central"}, // wins over pb-vars'
			SubstituteFrom: []vidrav1alpha1.SubstituteReference{
				{Kind: "ConfigMap", Name: "pb-vars"}, {Kind: "Secret", Name: "pb-secret"},
				{Kind: "ConfigMap", Name: "pb-absent", Optional: true},
			},
		}
	})
	built := buildsOf(t, "GitSync")
	create(t, gs)
	ready(t, gs)
	for _, m := range fleet.Members {
		waitData(t, m, ns, "settings", "ring", "blue")
		for key, want := range map[string]string{"region": "eu-central", "replicas": "2", "password": "s3cret", "tier": "standard", "literal": "${region}"} {
			if got := dataOf(t, m, ns, "settings", key); got != want {
				t.Errorf("%s: settings %s = %q, want %q", m.Name, key, got, want)
			}
		}
		if got := dataOf(t, m, ns, "script", "run.sh"); got != "echo ${HOME}" {
			t.Errorf("%s: the object annotated substitute: disabled was changed: %q", m.Name, got)
		}
	}
	if n := buildsOf(t, "GitSync") - built; n != 1 {
		t.Errorf("two clusters of equal variables took %v builds, want 1", n)
	}
	// Each VidraResource says what it was built with, a Secret's value not shown.
	for _, vr := range resourcesOf(t, gs) {
		want := `{"cluster.labels.ring":"blue","password":"<Secret pb-secret>","region":"eu-central","replicas":"2"}`
		if got := vr.Annotations[vidrav1alpha1.BundleVariablesAnnotation]; got != want {
			t.Errorf("VidraResource %s built with %s, want %s", vr.Name, got, want)
		}
	}

	// A label changed on one cluster: that cluster's bundle alone is built again.
	built = buildsOf(t, "GitSync")
	labelCluster(t, second, map[string]string{"ring": "green", "zone": "b"})
	requestSync(t, gs)
	waitData(t, second, ns, "settings", "ring", "green")
	if n := buildsOf(t, "GitSync") - built; n != 1 {
		t.Errorf("a label changed on one cluster took %v builds, want 1", n)
	}
	if got := dataOf(t, first, ns, "settings", "ring"); got != "blue" {
		t.Errorf("%s: ring = %q, want blue still", first.Name, got)
	}

	// A commit that names a label one cluster lacks: that cluster keeps what it had.
	repo.Commit(t, "main", map[string]string{"deploy/settings.yaml": settings + "  zone: ${cluster.labels.zone}\n  owner: ${cluster.labels.owner}\n"}, "owner")
	labelCluster(t, first, map[string]string{"ring": "blue", "zone": "a", "owner": "team-a"})
	requestSync(t, gs)
	condition(t, gs, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonBuildFailed)
	if msg := readyMessage(gs); !containsAll(msg, "cluster "+second.Name+": postBuild: ConfigMap settings: ${cluster.labels.owner}: cluster "+second.Name+" has no such label") || containsAll(msg, first.Name+":") {
		t.Errorf("Ready says %q, want the missing label named, on %s alone", msg, second.Name)
	}
	waitData(t, first, ns, "settings", "owner", "team-a")
	if got := dataOf(t, second, ns, "settings", "ring"); got != "green" {
		t.Errorf("%s: ring = %q, want what it had kept", second.Name, got)
	}
}

// Adding a spec.postBuild to a sync, and taking it away, updates the VidraResources it
// had where they are: no object on a member is deleted and made again.
func TestPostBuildKeepsTheVidraResourcesASyncHad(t *testing.T) {
	const ns = "gs-postbuild-keep"
	createNamespace(t, ns)
	srv := gitserver.New(t)
	repo := srv.Repo(t, "keep")
	repo.Commit(t, "main", map[string]string{"app.yaml": configMap("app", "${cluster.name}")}, "app")
	gs := gitSync("postbuild-keep", repo.URL(), func(gs *vidrav1alpha1.GitSync) { gs.Spec.Destination = everyMember(ns) })
	create(t, gs)
	ready(t, gs)
	resources, objects := uidsOf(t, resourcesOf(t, gs)), map[string]types.UID{}
	for _, m := range fleet.Members {
		waitValue(t, m, ns, "app", "${cluster.name}")
		objects[m.Name] = configMapUID(t, m, ns, "app")
	}

	update(t, gs, func() { gs.Spec.PostBuild = &vidrav1alpha1.PostBuild{} })
	for _, m := range fleet.Members {
		waitValue(t, m, ns, "app", m.Name)
		if configMapUID(t, m, ns, "app") != objects[m.Name] {
			t.Errorf("%s: the ConfigMap was deleted and made again", m.Name)
		}
	}
	ready(t, gs)
	update(t, gs, func() { gs.Spec.PostBuild = nil })
	for _, m := range fleet.Members {
		waitValue(t, m, ns, "app", "${cluster.name}")
		if configMapUID(t, m, ns, "app") != objects[m.Name] {
			t.Errorf("%s: the ConfigMap was deleted and made again", m.Name)
		}
	}
	ready(t, gs)
	if got := uidsOf(t, resourcesOf(t, gs)); !maps.Equal(got, resources) {
		t.Errorf("VidraResources %v, want those it had, %v", got, resources)
	}
}

// What a sync's spec.postBuild names but cannot read stops it, saying what and why:
// a ConfigMap whoever changed it may not get, one that does not exist, a key that is not
// a variable's name.
func TestPostBuildSaysWhatItCannotRead(t *testing.T) {
	const ns = "gs-postbuild-bad"
	createNamespace(t, ns)
	createConfigMap(t, "pb-bad-key", map[string]string{"not-a-name": "x"})
	srv := gitserver.New(t)
	repo := srv.Repo(t, "bad")
	repo.Commit(t, "main", map[string]string{"app.yaml": configMap("app", "${region}")}, "app")
	gs := gitSync("postbuild-bad", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Destination = toCluster(fleet.Members[0].Name, ns)
		gs.Spec.PostBuild = &vidrav1alpha1.PostBuild{SubstituteFrom: []vidrav1alpha1.SubstituteReference{{Kind: "ConfigMap", Name: "pb-bad-key"}}}
	})
	gs.Annotations = map[string]string{}
	setAuthor(gs, "team-b")
	create(t, gs)
	condition(t, gs, vidrav1alpha1.ConditionStalled, metav1.ConditionTrue, vidrav1alpha1.ReasonCredentialsRefused)
	if msg := readyMessage(gs); !containsAll(msg, "spec.postBuild.substituteFrom[0]", "team-b", "may not get ConfigMap "+namespace+"/pb-bad-key") {
		t.Errorf("Ready says %q", msg)
	}

	for _, step := range []struct {
		ref  vidrav1alpha1.SubstituteReference
		want []string
	}{
		{vidrav1alpha1.SubstituteReference{Kind: "ConfigMap", Name: "pb-bad-key"}, []string{`key "not-a-name" is not a variable's name`}},
		{vidrav1alpha1.SubstituteReference{Kind: "ConfigMap", Name: "pb-none"}, []string{"ConfigMap " + namespace + "/pb-none not found", "optional"}},
		{vidrav1alpha1.SubstituteReference{Kind: "Secret", Name: "pb-none"}, []string{"Secret " + namespace + "/pb-none not found"}},
	} {
		update(t, gs, func() {
			setAuthor(gs, "")
			gs.Spec.PostBuild.SubstituteFrom = []vidrav1alpha1.SubstituteReference{step.ref}
		})
		condition(t, gs, vidrav1alpha1.ConditionStalled, metav1.ConditionTrue, vidrav1alpha1.ReasonSourceInvalid)
		if msg := readyMessage(gs); !containsAll(msg, step.want...) {
			t.Errorf("Ready says %q, want %q", msg, step.want)
		}
	}

	// A variable nothing sets: the sync names it, for the cluster.
	update(t, gs, func() { gs.Spec.PostBuild.SubstituteFrom[0].Optional = true })
	condition(t, gs, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonBuildFailed)
	if msg := readyMessage(gs); !containsAll(msg, "cluster "+fleet.Members[0].Name, "ConfigMap app: ${region} is not set") {
		t.Errorf("Ready says %q", msg)
	}
	update(t, gs, func() { gs.Spec.PostBuild.Substitute = map[string]string{"region": "eu"} })
	ready(t, gs)
	waitValue(t, fleet.Members[0], ns, "app", "eu")
}

// labelCluster sets the labels of a member's VidraCluster, as an admin labels its
// enrollment Secret, until the test ends.
func labelCluster(t testing.TB, m *testfleet.Cluster, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	set := func(labels map[string]string) {
		secret := &corev1.Secret{}
		if err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: m.Name}, secret); err != nil {
			t.Fatal(err)
		}
		base := secret.DeepCopy()
		secret.Labels = map[string]string{vidrav1alpha1.ClusterLabel: m.Name}
		maps.Copy(secret.Labels, labels)
		if err := fleet.Hub.Client.Patch(ctx, secret, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
		testfleet.Eventually(t, 30*time.Second, "VidraCluster "+m.Name+" labeled", func() (bool, error) {
			vc := &vidrav1alpha1.VidraCluster{}
			if err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: m.Name}, vc); err != nil {
				return false, err
			}
			for k, v := range labels {
				if vc.Labels[k] != v {
					return false, nil
				}
			}
			return len(vc.Labels) == len(labels), nil
		})
	}
	set(labels)
	t.Cleanup(func() { set(nil) })
}

// createConfigMap creates a ConfigMap in the operator's namespace until the test ends.
func createConfigMap(t testing.TB, name string, data map[string]string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Data: data}
	if err := fleet.Hub.Client.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Hub.Client.Delete(context.Background(), cm) })
}

// buildsOf counts the bundles the operator built for syncs of kind (none before the
// first, whose series does not exist yet).
func buildsOf(t testing.TB, kind string) float64 {
	return max(0, testfleet.MetricValue(t, registry, "vidra_source_builds_total", map[string]string{"kind": kind, "result": "ok"}))
}

func uidsOf(t testing.TB, vrs []vidrav1alpha1.VidraResource) map[string]types.UID {
	t.Helper()
	out := map[string]types.UID{}
	for _, vr := range vrs {
		out[vr.Name] = vr.UID
	}
	if len(out) == 0 {
		t.Fatal("no VidraResources")
	}
	return out
}

func configMapUID(t testing.TB, c *testfleet.Cluster, ns, name string) types.UID {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
		t.Fatal(err)
	}
	return cm.UID
}

// An OCISync's spec.postBuild is a GitSync's: the artifact, pulled once, is delivered
// with each cluster's name put in, built for each.
func TestOCIPostBuildPutsInEachClustersName(t *testing.T) {
	const ns = "ocis-postbuild"
	createNamespace(t, ns)
	reg := ociregistry.New(t)
	digest := reg.Push(t, "manifests/postbuild", "1.0.0", map[string]string{"app.yaml": configMap("app", "${cluster.name} in ${env}")})
	os := ociSync("postbuild", reg.URL("manifests/postbuild"), func(os *vidrav1alpha1.OCISync) {
		os.Spec.Source.Ref = &vidrav1alpha1.OCIRef{Tag: "1.0.0"}
		os.Spec.Destination = everyMember(ns)
		os.Spec.PostBuild = &vidrav1alpha1.PostBuild{Substitute: map[string]string{"env": "prod"}}
	})
	built := buildsOf(t, "OCISync")
	create(t, os)
	readyAt(t, os, "1.0.0@"+digest)
	for _, m := range fleet.Members {
		waitValue(t, m, ns, "app", m.Name+" in prod")
	}
	if n := buildsOf(t, "OCISync") - built; n != float64(len(fleet.Members)) {
		t.Errorf("%v builds for %d clusters of different names, want one each", n, len(fleet.Members))
	}
	if src := os.Status.Source; src == nil || !strings.HasPrefix(src.Digest, "sha256:") {
		t.Errorf("status.source = %+v, want the digest of the artifact's bundle", src)
	}
}

// A namespace may name a variable, as Flux's postBuild allows (apps-${cluster.name}):
// the bundle is a template until each cluster's build, which is checked in full.
func TestPostBuildPutsEachClusterInANamespaceOfItsName(t *testing.T) {
	for _, m := range fleet.Members {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pbns-" + m.Name}}
		if err := m.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	srv := gitserver.New(t)
	repo := srv.Repo(t, "postbuild-namespace")
	app := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: pbns-${cluster.name}\ndata:\n  value: ${cluster.name} in ${env}\n"
	repo.Commit(t, "main", map[string]string{"app.yaml": app}, "app")
	gs := gitSync("postbuild-namespace", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Destination = everyMember("")
		gs.Spec.PostBuild = &vidrav1alpha1.PostBuild{Substitute: map[string]string{"env": "prod"}}
	})
	create(t, gs)
	ready(t, gs)
	for _, m := range fleet.Members {
		waitValue(t, m, "pbns-"+m.Name, "app", m.Name+" in prod")
	}
}
