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
	"github.com/vidra-operator/vidra/internal/source/infrahub"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/otlptest"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
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
	// Traces go to a real OTLP/HTTP receiver.
	traces := otlptest.New()
	t.Cleanup(traces.Close)
	feature := features.New("an InfrahubSync written for the original Vidra delivers its artifacts").
		Setup(createOperatorNamespace).
		Setup(startInfrahub).
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// The original's credentials: a Secret labeled with Infrahub's host.
			kubectl(ctx, t, nil, "-n", operatorNamespace, "create", "secret", "generic", "infrahub-admin",
				"--from-literal=username=admin", "--from-literal=password=infrahub")
			kubectl(ctx, t, nil, "-n", operatorNamespace, "label", "secret", "infrahub-admin", "infrahub-api-url=127.0.0.1")
			// Sent only where an admin says (the original had no such rule).
			kubectl(ctx, t, nil, "-n", operatorNamespace, "annotate", "secret", "infrahub-admin",
				"vidra.infrahub.operators.com/allowed-urls="+infrahubFrom(ctx).URL())
			kubectl(ctx, t, nil, "-n", operatorNamespace, "create", "secret", "generic", "infrahub-webhook", "--from-literal=key=e2e-webhook-key")
			// Bundles for this cluster are applied as a ServiceAccount, never as the
			// operator: the admin lets it write ConfigMaps where the artifacts go.
			kubectl(ctx, t, nil, "-n", operatorNamespace, "create", "serviceaccount", "vidra-local")
			for _, ns := range []string{"default", "kube-public"} {
				kubectl(ctx, t, nil, "-n", ns, "create", "role", "vidra-local", "--verb=get,list,watch,create,update,patch,delete", "--resource=configmaps")
				kubectl(ctx, t, nil, "-n", ns, "create", "rolebinding", "vidra-local", "--role=vidra-local", "--serviceaccount="+operatorNamespace+":vidra-local")
			}
			return ctx
		}).
		Setup(startOperator("infrahub", "--cluster-provider=none", "--hub-id=e2e", "--local-service-account="+operatorNamespace+"/vidra-local",
			"--webhook-bind-address="+webhookAddr, "--infrahub-webhook-secret=infrahub-webhook", "--otlp-endpoint="+traces.URL())).
		Assess("kubectl apply of the original manifest delivers the artifact to the local cluster", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s := infrahubFrom(ctx)
			defer func() {
				if t.Failed() {
					t.Log(kubectl(ctx, t, nil, "get", "infrahubsyncs,vidraresources", "-o", "yaml"))
					t.Log(string(operatorFrom(ctx, "infrahub").Logs()))
				}
			}()
			kubectl(ctx, t, originalSync(t, s.URL()), "apply", "-f", "-")
			// Who asked, which the chart's admission policy records; this cluster runs
			// without the chart, so the admin records it, and the operator checks that they
			// may use the credentials Secret.
			// requested-at asks for a sync at once, as after any fix of a stalled sync.
			kubectl(ctx, t, nil, "annotate", "infrahubsync", "infrahubsync-sample",
				"vidra.infrahub.operators.com/requested-by=default", "vidra.infrahub.operators.com/requested-by-groups=system:masters",
				"vidra.infrahub.operators.com/requested-at="+time.Now().UTC().Format(time.RFC3339Nano))
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
  annotations: # who asked, as the chart's admission policy would record it
    vidra.infrahub.operators.com/requested-by: default
    vidra.infrahub.operators.com/requested-by-groups: system:masters
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
			start := time.Now()
			sendWebhook(ctx, t, webhookAddr, "e2e-event-1")
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
		Assess("one trace follows a webhook to the apply", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// Once the sync is idle (the VidraResource's Ready requeues it once more), a
			// new version and its webhook: the reconcile the webhook asks for does the work.
			testfleet.Eventually(t, 30*time.Second, "webserver-live Succeeded", func() (bool, error) {
				return strings.Contains(kubectl(ctx, t, nil, "get", "infrahubsync", "webserver-live"), "Succeeded"), nil
			})
			time.Sleep(2 * time.Second)
			infrahubFrom(ctx).Put("main", infrahubtest.Artifact{
				ID: "18a6d5a2-0000-0000-0000-000000000001", Name: "Webserver_Manifest", TargetLabel: "web-01", DefinitionName: "webserver",
				Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: webserver-config\ndata:\n  version: \"3\"\n",
			})
			sendWebhook(ctx, t, webhookAddr, "e2e-event-2")
			// The operator exports in batches, every 5 s.
			var chain []otlptest.Span
			t.Cleanup(func() {
				if chain == nil {
					for _, s := range traces.Spans() {
						t.Logf("received %s trace %s span %s parent %s %v", s.Name, s.TraceID, s.SpanID, s.ParentSpanID, s.Attributes)
					}
				}
			})
			testfleet.Eventually(t, 30*time.Second, "the webhook's trace through the sync to the apply", func() (bool, error) {
				chain = webhookTrace(traces.Spans(), "e2e-event-2", "webserver-live")
				return chain != nil, nil
			})
			for _, s := range chain {
				t.Logf("span %-24s trace %s span %s parent %s %v", s.Name, s.TraceID[:8], s.SpanID[:8], s.ParentSpanID, s.Attributes)
			}
			apply := chain[len(chain)-1]
			if apply.Attributes["vidra.objects.updated"] != "1" || apply.Service != "vidra" {
				t.Errorf("the apply's span: service %q, attributes %v; want one object updated", apply.Service, apply.Attributes)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// This fleet runs no garbage collector: the VidraResources are deleted here,
			// while the operator still runs to release their objects.
			kubectl(ctx, t, nil, "delete", "infrahubsync", "infrahubsync-sample", "webserver-live")
			kubectl(ctx, t, nil, "delete", "vidraresources", "-l", "vidra.infrahub.operators.com/infrahubsync in (infrahubsync-sample,webserver-live)", "--timeout=60s")
			kubectl(ctx, t, nil, "-n", operatorNamespace, "delete", "secret", "infrahub-admin", "infrahub-webhook")
			kubectl(ctx, t, nil, "-n", operatorNamespace, "delete", "serviceaccount", "vidra-local")
			for _, ns := range []string{"default", "kube-public"} {
				kubectl(ctx, t, nil, "-n", ns, "delete", "role,rolebinding", "vidra-local")
			}
			return ctx
		}).
		Teardown(stopOperator("infrahub")).
		Feature()
	testenv.Test(t, feature)
}

// webhookTrace finds, in one trace, the spans of a webhook delivery (event id), the
// InfrahubSync reconcile it asked for (sync), that reconcile's listing and download, its
// write of a VidraResource, and that VidraResource's reconcile, each the child of the one
// before (listing and download of the reconcile). It returns them in that order, the
// VidraResource's reconcile last; nil until all are there.
func webhookTrace(spans []otlptest.Span, eventID, sync string) []otlptest.Span {
	find := func(name, parent string, match func(otlptest.Span) bool) *otlptest.Span {
		for i := range spans {
			s := &spans[i]
			if s.Name == name && (parent == "" || s.ParentSpanID == parent) && (match == nil || match(*s)) {
				return s
			}
		}
		return nil
	}
	webhook := find("infrahub.webhook", "", func(s otlptest.Span) bool { return s.Attributes["infrahub.event_id"] == eventID })
	if webhook == nil {
		return nil
	}
	reconcile := find("sync.reconcile", webhook.SpanID, func(s otlptest.Span) bool { return s.Attributes["vidra.sync"] == sync })
	if reconcile == nil {
		return nil
	}
	list := find("infrahub.list", reconcile.SpanID, nil)
	download := find("infrahub.download", reconcile.SpanID, nil)
	write := find("vidraresource.write", reconcile.SpanID, nil)
	if list == nil || download == nil || write == nil {
		return nil
	}
	apply := find("vidraresource.reconcile", write.SpanID, nil)
	if apply == nil {
		return nil
	}
	for _, s := range []*otlptest.Span{reconcile, list, download, write, apply} {
		if s.TraceID != webhook.TraceID {
			return nil
		}
	}
	return []otlptest.Span{*webhook, *reconcile, *list, *download, *write, *apply}
}

// sendWebhook delivers Infrahub's signed artifact.updated event eventID to the operator.
func sendWebhook(ctx context.Context, t *testing.T, addr, eventID string) {
	t.Helper()
	body := fmt.Appendf(nil, `{"data":{"node_id":"18a6d5a2-0000-0000-0000-000000000001","artifact_definition_id":"d","artifact_definition_name":"webserver","target_id":"t","target_kind":"InfraServer","checksum":"c","checksum_previous":null,"storage_id":"s","storage_id_previous":null},"id":%q,"branch":"main","account_id":"a","occured_at":"2026-01-01 00:00:00.000000+00:00","event":"infrahub.artifact.updated"}`, eventID)
	now := time.Now().Unix()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/hooks/infrahub", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	msgID := "msg_" + eventID
	req.Header.Set(infrahub.HeaderWebhookID, msgID)
	req.Header.Set(infrahub.HeaderWebhookTimestamp, fmt.Sprint(now))
	req.Header.Set(infrahub.HeaderWebhookSignature, infrahub.SignWebhook([]byte("e2e-webhook-key"), msgID, now, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("webhook %s: HTTP %d, want 202", eventID, resp.StatusCode)
	}
}
