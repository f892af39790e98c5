package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/vidra-operator/vidra/internal/test/ociregistry"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// TestOCISyncDeliversAnArtifactAndItsNextVersion: a user enrolls two clusters, publishes
// manifests as an OCI artifact in the format `flux push artifact` writes, applies an
// OCISync with a semver range, and sees the manifests on both; the next version pushed,
// and a sync requested as a CI job would request it, replaces them, with the artifact's
// manifest and layer downloaded once per version whatever the number of clusters.
func TestOCISyncDeliversAnArtifactAndItsNextVersion(t *testing.T) {
	reg := ociregistry.New(t)
	first := reg.Push(t, "platform", "1.0.0", map[string]string{"deploy/web.yaml": ociConfigMap("v1")})
	members := []string{"oci-a", "oci-b"}
	feature := features.New("an OCISync delivers an artifact to the fleet, then its next version").
		Setup(createOperatorNamespace).
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			enrollMembers(ctx, t, members, "site=oci")
			return ctx
		}).
		Setup(startOperator("ocisync", "--cluster-probe-interval=1s")).
		Assess("kubectl apply of an OCISync delivers the artifact's path to every selected cluster", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			defer func() {
				if t.Failed() {
					t.Log(kubectl(ctx, t, nil, "get", "ocisyncs,vidraresources", "-o", "yaml"))
					t.Log(string(operatorFrom(ctx, "ocisync").Logs()))
				}
			}()
			kubectl(ctx, t, fmt.Appendf(nil, `apiVersion: infrahub.operators.com/v1alpha1
kind: OCISync
metadata:
  name: platform
spec:
  interval: 1h
  source:
    url: %s
    insecureAllowHTTP: true
    ref: {semver: ">=1.0.0"}
    path: deploy
  destination:
    clusterSelector: {matchLabels: {site: oci}}
    namespace: default
`, reg.URL("platform")), "apply", "-f", "-")
			for i := range members {
				waitMemberConfigMap(ctx, t, i, "platform-oci", "v1")
			}
			var out string
			testfleet.Eventually(t, 30*time.Second, "kubectl get ocisyncs shows the tag and digest, Ready", func() (bool, error) {
				out = kubectl(ctx, t, nil, "get", "ocisyncs")
				return strings.Contains(out, "1.0.0@"+first) && strings.Contains(out, "True"), nil
			})
			t.Logf("kubectl get ocisyncs:\n%s", out)
			return ctx
		}).
		Assess("the next version, once a sync is requested, replaces it on every cluster", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			blobs := reg.BlobGets("platform")
			second := reg.Push(t, "platform", "1.1.0", map[string]string{"deploy/web.yaml": ociConfigMap("v2")})
			kubectl(ctx, t, nil, "annotate", "--overwrite", "ocisync", "platform", "vidra.infrahub.operators.com/requested-at="+time.Now().Format(time.RFC3339Nano))
			for i := range members {
				waitMemberConfigMap(ctx, t, i, "platform-oci", "v2")
			}
			testfleet.Eventually(t, 30*time.Second, "kubectl get ocisyncs shows the new version", func() (bool, error) {
				return strings.Contains(kubectl(ctx, t, nil, "get", "ocisyncs"), "1.1.0@"+second), nil
			})
			// The new version's config and layer, once each, for both clusters.
			n := reg.BlobGets("platform") - blobs
			t.Logf("version 1.1.0 on %d clusters: the registry served %d blobs", len(members), n)
			if n > 2 {
				t.Errorf("the registry served %d blobs for one new version and 2 clusters, want at most 2", n)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// This fleet runs no garbage collector: the VidraResources are deleted here,
			// while the operator still runs to release their objects.
			kubectl(ctx, t, nil, "delete", "ocisync", "platform")
			kubectl(ctx, t, nil, "delete", "vidraresources", "-l", "vidra.infrahub.operators.com/ocisync=platform", "--timeout=60s")
			kubectl(ctx, t, nil, "-n", operatorNamespace, "delete", "secret", members[0], members[1])
			return ctx
		}).
		Teardown(stopOperator("ocisync")).
		Feature()
	testenv.Test(t, feature)
}

func ociConfigMap(value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: platform-oci\ndata:\n  value: %q\n", value)
}
