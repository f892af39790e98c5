package sourcesync_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/ociregistry"
)

func ociSync(name, url string, mutate ...func(*vidrav1alpha1.OCISync)) *vidrav1alpha1.OCISync {
	os := &vidrav1alpha1.OCISync{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       vidrav1alpha1.OCISyncSpec{Source: vidrav1alpha1.OCISource{URL: url, InsecureAllowHTTP: true}},
	}
	for _, m := range mutate {
		m(os)
	}
	return os
}

// An artifact as flux push artifact writes it is delivered; a newer tag in the semver
// range replaces it, pulled once.
func TestOCIArtifactIsDelivered(t *testing.T) {
	const ns = "ocis-app"
	createNamespace(t, ns)
	reg := ociregistry.New(t)
	v1 := reg.Push(t, "manifests/app", "1.0.0", map[string]string{
		"deploy/web.yaml": configMap("web", "1.0.0"),
		"deploy/api.json": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"api"},"data":{"value":"json"}}`,
	})
	os := ociSync("app", reg.URL("manifests/app"), func(os *vidrav1alpha1.OCISync) {
		os.Spec.Source.Ref = &vidrav1alpha1.OCIRef{SemVer: "1.x"}
		os.Spec.Source.Path = "deploy"
		os.Spec.Destination = everyMember(ns)
	})
	create(t, os)
	readyAt(t, os, "1.0.0@"+v1)
	for _, m := range fleet.Members {
		waitValue(t, m, ns, "web", "1.0.0")
		waitValue(t, m, ns, "api", "json")
	}
	blobs := reg.BlobGets("manifests/app")

	v2 := reg.Push(t, "manifests/app", "1.1.0", map[string]string{"deploy/web.yaml": configMap("web", "1.1.0")})
	reg.Push(t, "manifests/app", "2.0.0", map[string]string{"deploy/web.yaml": configMap("web", "2.0.0")})
	requestSync(t, os)
	readyAt(t, os, "1.1.0@"+v2)
	for _, m := range fleet.Members {
		waitValue(t, m, ns, "web", "1.1.0")
		waitValue(t, m, ns, "api", "") // left the artifact: pruned
	}
	if n := reg.BlobGets("manifests/app") - blobs; n > 2 {
		t.Errorf("%d blob downloads for one new artifact (config and layer at most)", n)
	}
}

// An artifact that is not tar+gzip is reported on the sync, and what it delivered stays.
func TestOCIArtifactThatIsNotTarGzipIsReported(t *testing.T) {
	const ns = "ocis-bad"
	createNamespace(t, ns)
	reg := ociregistry.New(t)
	good := reg.Push(t, "manifests/bad", "good", map[string]string{"web.yaml": configMap("web", "good")})
	os := ociSync("notgzip", reg.URL("manifests/bad"), func(os *vidrav1alpha1.OCISync) {
		os.Spec.Source.Ref = &vidrav1alpha1.OCIRef{Tag: "good"}
		os.Spec.Destination = toCluster(fleet.Members[1].Name, ns)
	})
	create(t, os)
	readyAt(t, os, "good@"+good)
	waitValue(t, fleet.Members[1], ns, "web", "good")

	reg.PushLayer(t, "manifests/bad", "plain", "application/vnd.cncf.flux.content.v1.tar+gzip", []byte(strings.Repeat("not gzip ", 10)))
	update(t, os, func() { os.Spec.Source.Ref.Tag = "plain" })
	condition(t, os, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonBuildFailed)
	if msg := readyMessage(os); !strings.Contains(msg, "gzip") {
		t.Errorf("Ready says %q, want it to say the layer is not gzip", msg)
	}
	waitEvent(t, os, vidrav1alpha1.ReasonBuildFailed, "gzip")
	if v := valueOf(t, fleet.Members[1], ns, "web"); v != "good" {
		t.Errorf("the delivered ConfigMap has %q, want it kept", v)
	}

	update(t, os, func() { os.Spec.Source.Ref.Tag = "missing" })
	condition(t, os, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonRefNotFound)
	waitEvent(t, os, vidrav1alpha1.ReasonRefNotFound, "missing")
	if v := valueOf(t, fleet.Members[1], ns, "web"); v != "good" {
		t.Errorf("the delivered ConfigMap has %q, want it kept", v)
	}
}

// A registry that lets anyone read its tags and manifests, and only its users its blobs
// (a registry authorizes each request): a sync without credentials naming the artifact
// another sync pulled with its Secret gets nothing of what that sync built. Before, the
// bundles built were remembered by URL, digest and path alone, and the second sync
// delivered the first one's bundle without the registry being asked for a blob.
func TestABuildIsSharedOnlyWithTheSameCredentials(t *testing.T) {
	const ns = "ocis-creds"
	createNamespace(t, ns)
	reg := ociregistry.New(t)
	digest := reg.Push(t, "manifests/private", "1.0.0", map[string]string{"web.yaml": configMap("web", "private")})
	reg.RequireBasicAuthForBlobs("team-a", "team-a-password")
	createSecret(t, "oci-team-a", map[string][]byte{"username": []byte("team-a"), "password": []byte("team-a-password")}, reg.URL("manifests/private"))
	m0, m1 := fleet.Members[0], fleet.Members[1]
	owner := ociSync("creds-owner", reg.URL("manifests/private"), func(os *vidrav1alpha1.OCISync) {
		os.Spec.Source.Ref = &vidrav1alpha1.OCIRef{Tag: "1.0.0"}
		os.Spec.Source.SecretRef = &vidrav1alpha1.LocalSecretReference{Name: "oci-team-a"}
		os.Spec.Destination = toCluster(m0.Name, ns)
	})
	create(t, owner)
	readyAt(t, owner, "1.0.0@"+digest)
	waitValue(t, m0, ns, "web", "private")

	other := ociSync("creds-other", reg.URL("manifests/private"), func(os *vidrav1alpha1.OCISync) {
		os.Spec.Source.Ref = &vidrav1alpha1.OCIRef{Tag: "1.0.0"}
		os.Spec.Destination = toCluster(m1.Name, ns)
	})
	create(t, other)
	condition(t, other, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonAuthenticationFailed)
	if msg := readyMessage(other); !strings.Contains(msg, "layer: the registry answered HTTP 401") {
		t.Errorf("Ready says %q, want the registry's refusal of the layer to the sync without credentials", msg)
	}
	if v := valueOf(t, m1, ns, "web"); v != "" {
		t.Errorf("member 1 holds %q, built with another sync's credentials", v)
	}
}
