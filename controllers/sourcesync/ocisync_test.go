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
