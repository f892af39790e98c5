package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/infrahub"
	"github.com/vidra-operator/vidra/internal/infrahub/infrahubtest"
	"github.com/vidra-operator/vidra/internal/testfleet"
)

type infrahubKey struct{}

// startInfrahub starts an Infrahub test double over TLS whose artifacts were rendered at
// the end of 2024, so the original manifest's targetDate (2025-01-01) sees them, and has
// the operator trust its CA the way a site does: through the system's trust store.
func startInfrahub(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	rendered := time.Date(2024, 12, 31, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return rendered }
	s := infrahubtest.New(infrahubtest.Options{TLS: true, Users: map[string]string{"admin": "infrahub"}, Now: clock})
	t.Cleanup(s.Close)
	s.Put("main", infrahubtest.Artifact{
		ID: "18a6d5a2-0000-0000-0000-000000000001", Name: "Webserver_Manifest", TargetLabel: "web-01", DefinitionName: "webserver",
		Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: webserver-config\ndata:\n  version: \"1\"\n",
	})
	caFile := filepath.Join(t.TempDir(), "infrahub-ca.pem")
	if err := os.WriteFile(caFile, s.CACertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSL_CERT_FILE", caFile)
	return context.WithValue(ctx, infrahubKey{}, s)
}

func infrahubFrom(ctx context.Context) *infrahubtest.Server {
	return ctx.Value(infrahubKey{}).(*infrahubtest.Server)
}

// originalSync is the original Vidra's InfrahubSync manifest, pointed at the double.
func originalSync(t *testing.T, url string) []byte {
	t.Helper()
	root, err := testfleet.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "apis", "v1alpha1", "testdata", "original-infrahubsync.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.ReplaceAll(data, []byte("http://infrahub-server:8000"), []byte(url))
}

func TestOriginalInfrahubSyncManifestWorksEndToEnd(t *testing.T) {
	webhookAddr, err := fleetenv.FreeLocalAddress()
	if err != nil {
		t.Fatal(err)
	}
	feature := features.New("an InfrahubSync written for the original Vidra delivers its artifacts").
		Setup(createOperatorNamespace).
		Setup(startInfrahub).
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// The original's credentials: a Secret labeled with Infrahub's host.
			kubectl(ctx, t, nil, "-n", operatorNamespace, "create", "secret", "generic", "infrahub-admin",
				"--from-literal=username=admin", "--from-literal=password=infrahub")
			kubectl(ctx, t, nil, "-n", operatorNamespace, "label", "secret", "infrahub-admin", "infrahub-api-url=127.0.0.1")
			kubectl(ctx, t, nil, "-n", operatorNamespace, "create", "secret", "generic", "infrahub-webhook", "--from-literal=key=e2e-webhook-key")
			return ctx
		}).
		Setup(startOperator("infrahub", "--cluster-provider=none", "--hub-id=e2e",
			"--webhook-bind-address="+webhookAddr, "--infrahub-webhook-secret=infrahub-webhook")).
		Assess("kubectl apply of the original manifest delivers the artifact to the local cluster", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s := infrahubFrom(ctx)
			kubectl(ctx, t, originalSync(t, s.URL()), "apply", "-f", "-")
			testfleet.Eventually(t, 60*time.Second, "ConfigMap default/webserver-config delivered", func() (bool, error) {
				out, err := fleetenv.Fleet(ctx).Hub.Kubectl(ctx, nil, "get", "configmap", "-n", "default", "webserver-config", "-o", "jsonpath={.data.version}")
				return err == nil && out == "1", nil
			})
			var out string
			testfleet.Eventually(t, 30*time.Second, "InfrahubSync Succeeded", func() (bool, error) {
				out = kubectl(ctx, t, nil, "get", "infrahubsyncs")
				return strings.Contains(out, "Succeeded"), nil
			})
			t.Logf("kubectl get infrahubsyncs:\n%s", out)
			t.Logf("kubectl get vidraresources:\n%s", kubectl(ctx, t, nil, "get", "vidraresources"))
			if s.Logins() != 1 {
				t.Errorf("%d logins with the labeled Secret's credentials, want 1", s.Logins())
			}
			return ctx
		}).
		Assess("a signed webhook to the operator syncs a sync that follows the branch at once", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s := infrahubFrom(ctx)
			live := fmt.Sprintf(`apiVersion: infrahub.operators.com/v1alpha1
kind: InfrahubSync
metadata:
  name: webserver-live
spec:
  interval: 1h
  source:
    infrahubAPIURL: %s
    artefactName: Webserver_Manifest
  destination:
    namespace: kube-public
`, s.URL())
			kubectl(ctx, t, []byte(live), "apply", "-f", "-")
			testfleet.Eventually(t, 60*time.Second, "ConfigMap kube-public/webserver-config delivered", func() (bool, error) {
				out, err := fleetenv.Fleet(ctx).Hub.Kubectl(ctx, nil, "get", "configmap", "-n", "kube-public", "webserver-config", "-o", "jsonpath={.data.version}")
				return err == nil && out == "1", nil
			})

			s.Put("main", infrahubtest.Artifact{
				ID: "18a6d5a2-0000-0000-0000-000000000001", Name: "Webserver_Manifest", TargetLabel: "web-01", DefinitionName: "webserver",
				Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: webserver-config\ndata:\n  version: \"2\"\n",
			})
			body := []byte(`{"data":{"node_id":"18a6d5a2-0000-0000-0000-000000000001","artifact_definition_id":"d","artifact_definition_name":"webserver","target_id":"t","target_kind":"InfraServer","checksum":"c","checksum_previous":null,"storage_id":"s","storage_id_previous":null},"id":"e2e-event-1","branch":"main","account_id":"a","occured_at":"2026-01-01 00:00:00.000000+00:00","event":"infrahub.artifact.updated"}`)
			now := time.Now().Unix()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+webhookAddr+"/hooks/infrahub", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set(infrahub.HeaderWebhookID, "msg_e2e")
			req.Header.Set(infrahub.HeaderWebhookTimestamp, fmt.Sprint(now))
			req.Header.Set(infrahub.HeaderWebhookSignature, infrahub.SignWebhook([]byte("e2e-webhook-key"), "msg_e2e", now, body))
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("webhook: HTTP %d, want 202", resp.StatusCode)
			}
			testfleet.Poll(t, 10*time.Millisecond, 30*time.Second, "ConfigMap updated", func() (bool, error) {
				out, err := fleetenv.Fleet(ctx).Hub.Kubectl(ctx, nil, "get", "configmap", "-n", "kube-public", "webserver-config", "-o", "jsonpath={.data.version}")
				return err == nil && out == "2", nil
			})
			t.Logf("webhook delivered -> applied in %v", time.Since(start).Round(time.Millisecond))
			// The pinned original sync is not concerned: its point in time is past.
			out, err := fleetenv.Fleet(ctx).Hub.Kubectl(ctx, nil, "get", "configmap", "-n", "default", "webserver-config", "-o", "jsonpath={.data.version}")
			if err != nil || out != "1" {
				t.Errorf("the sync pinned to 2025-01-01 now delivers version %q (%v)", out, err)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// This fleet runs no garbage collector: the VidraResources are deleted here,
			// while the operator still runs to release their objects.
			kubectl(ctx, t, nil, "delete", "infrahubsync", "infrahubsync-sample", "webserver-live")
			kubectl(ctx, t, nil, "delete", "vidraresources", "-l", "vidra.infrahub.operators.com/infrahubsync in (infrahubsync-sample,webserver-live)", "--timeout=60s")
			kubectl(ctx, t, nil, "-n", operatorNamespace, "delete", "secret", "infrahub-admin", "infrahub-webhook")
			return ctx
		}).
		Teardown(stopOperator("infrahub")).
		Feature()
	testenv.Test(t, feature)
}
