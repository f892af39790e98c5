package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/test/testbundle"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// plugin runs "kubectl vidra ARGS..." (the plugin binary kubectl would run) against the
// hub as its admin.
func plugin(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	kubeconfig, err := fleetenv.Fleet(ctx).Hub.WriteKubeconfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return pluginWith(ctx, t, append(args, "--kubeconfig="+kubeconfig)...)
}

// pluginWith runs "kubectl vidra ARGS..." with the connection flags args give.
func pluginWith(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	binary, err := fleetenv.PluginBinary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl vidra %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestLargeBundleIsDeliveredAndKeptOnEvents: a user uploads a bundle of more than 10 MiB
// (generated CRDs, a custom resource of each, ConfigMaps) with kubectl vidra upload, to an
// operator started with --reconcile-on-events. It is delivered whole; a change made on
// the member to a VidraResource that did not ask for event-driven repair is repaired at
// once; deleting the VidraResource releases the objects and the store collects the
// content once its grace period is over.
func TestLargeBundleIsDeliveredAndKeptOnEvents(t *testing.T) {
	var bundle testbundle.Bundle
	feature := features.New("a bundle of any size is delivered and kept").
		Setup(createOperatorNamespace).
		Setup(startOperator("delivery", "--reconcile-on-events", "--resync-interval=1h", "--content-grace-period=3s", "--cluster-probe-interval=1s")).
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			member := fleetenv.Fleet(ctx).Members[0]
			path := writeFile(t, "edge-3.kubeconfig", member.Kubeconfig)
			kubectl(ctx, t, nil, "-n", operatorNamespace, "create", "secret", "generic", "edge-3", "--from-file=kubeconfig="+path)
			kubectl(ctx, t, nil, "-n", operatorNamespace, "label", "secret", "edge-3", "vidra.infrahub.operators.com/cluster=edge-3")
			var err error
			// The member serves KubeVirt already: the bundle brings CRDs of its own.
			bundle, err = testbundle.New(testbundle.Options{MinBytes: 10 << 20, WithoutKubeVirt: true, GeneratedCRDs: 6, Group: "e2e.example", Seed: 41})
			if err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Assess("kubectl vidra upload delivers a 10 MiB bundle", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			file := writeFile(t, "bundle.yaml", bundle.Manifest)
			out := plugin(ctx, t, "upload", "big", "-f", file, "--cluster", "edge-3", "--namespace", "big")
			t.Logf("kubectl vidra upload:\n%s", out)
			if !strings.Contains(out, content.Digest(bundle.Manifest)) || !strings.Contains(out, "vidraresource/big created") {
				t.Errorf("upload output: %s", out)
			}
			var table string
			testfleet.Eventually(t, 3*time.Minute, "big Succeeded", func() (bool, error) {
				table = kubectl(ctx, t, nil, "get", "vidraresources")
				r := row(table, "big")
				return len(r) >= 4 && r[2] == "Succeeded" && r[3] == fmt.Sprint(bundle.Objects()+1), nil
			})
			t.Logf("kubectl get vidraresources:\n%s", table)
			member := fleetenv.Fleet(ctx).Members[0]
			cr := strings.Fields(bundle.CustomResources[len(bundle.CustomResources)-1])
			kind := strings.ToLower(cr[1]) + "s." + strings.Split(cr[0], "/")[0]
			if _, err := member.Kubectl(ctx, nil, "-n", "big", "get", kind, cr[2]); err != nil {
				t.Errorf("custom resource on the member: %v", err)
			}
			return ctx
		}).
		Assess("with --reconcile-on-events a change on the member is repaired at once", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			member := fleetenv.Fleet(ctx).Members[0]
			name := bundle.ConfigMaps[0]
			want, err := member.Kubectl(ctx, nil, "-n", "big", "get", "configmap", name, "-o", "jsonpath={.data.key000}")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := member.Kubectl(ctx, nil, "-n", "big", "patch", "configmap", name, "--type=merge", "-p", `{"data":{"key000":"changed by hand"}}`); err != nil {
				t.Fatal(err)
			}
			// The resync is an hour away: only the event can bring it back.
			testfleet.Eventually(t, 20*time.Second, name+" repaired", func() (bool, error) {
				got, err := member.Kubectl(ctx, nil, "-n", "big", "get", "configmap", name, "-o", "jsonpath={.data.key000}")
				return err == nil && got == want, err
			})
			return ctx
		}).
		Assess("deleting the VidraResource releases its objects and the content is collected", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			kubectl(ctx, t, nil, "delete", "vidraresource", "big", "--wait=true", "--timeout=120s")
			member := fleetenv.Fleet(ctx).Members[0]
			if out, err := member.Kubectl(ctx, nil, "-n", "big", "get", "configmap", bundle.ConfigMaps[0], "--ignore-not-found"); err != nil || strings.TrimSpace(out) != "" {
				t.Errorf("a ConfigMap of the deleted bundle is left: %q, %v", out, err)
			}
			testfleet.Eventually(t, 30*time.Second, "content chunks collected", func() (bool, error) {
				out := kubectl(ctx, t, nil, "-n", operatorNamespace, "get", "secrets", "-l", content.ChunkLabel, "-o", "name")
				return strings.TrimSpace(out) == "", nil
			})
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			kubectl(ctx, t, nil, "-n", operatorNamespace, "delete", "secret", "edge-3", "--ignore-not-found")
			// Unenrolled before the operator stops, so no later test sees edge-3 engaged.
			testfleet.Eventually(t, 30*time.Second, "edge-3 unenrolled", func() (bool, error) {
				return strings.TrimSpace(kubectl(ctx, t, nil, "get", "vidraclusters", "edge-3", "--ignore-not-found")) == "", nil
			})
			return ctx
		}).
		Teardown(stopOperator("delivery")).
		Feature()
	testenv.Test(t, feature)
}
