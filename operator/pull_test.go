package operator_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/identity"
	"github.com/vidra-operator/vidra/internal/fleet/pull"
	"github.com/vidra-operator/vidra/internal/test/kubevirtsim"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
	"github.com/vidra-operator/vidra/operator"
)

// pullHub is a hub with the chart installed and the operator running with the chart's
// token, a push member, and a pull member whose agent runs in the test process with the
// token of the agent's own ServiceAccount there.
type pullHub struct {
	fleet *testfleet.Fleet
	admin client.Client
	// operator acts as the chart's ServiceAccount, which alone writes bundles.
	operator     client.Client
	pullMember   *testfleet.Cluster
	pushMember   *testfleet.Cluster
	enrollment   pull.Enrollment
	agentStop    context.CancelFunc
	agent        *testoperator.Operator
	agentVersion string
	kubevirt     *kubevirtsim.Simulator
}

// appNamespace is the only namespace the pull member's identity may deliver to.
const appNamespace = "apps"

func startPullHub(t *testing.T) *pullHub {
	t.Helper()
	helm := os.Getenv("HELM")
	if helm == "" {
		t.Skip("HELM is not set: run `make test`, or set HELM to a helm binary (make helm builds bin/tools/helm-v3.19.0)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	// The hub deletes a pull cluster's namespace when it is unenrolled.
	fleet, err := testfleet.Start(ctx, testfleet.Options{Members: 2, ControllerManager: true, MemberCRDDirectories: []string{"../internal/test/kubevirtsim/testdata/crds"}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	h := &pullHub{fleet: fleet, admin: testfleet.Retrying(fleet.Hub.Client), pullMember: fleet.Members[0], pushMember: fleet.Members[1]}
	// KubeVirt on the pull member: a simulator plays virt-controller, with no restart API
	// (VMs restart by their VMI being deleted).
	log, err := testfleet.Logger()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if h.kubevirt, err = kubevirtsim.New(h.pullMember.Config, kubevirtsim.Options{Log: log.WithName("kubevirt")}); err != nil {
		cancel()
		t.Fatal(err)
	}
	go h.kubevirt.Run(ctx)
	_ = installChart(ctx, t, helm, h.admin, chartValues{recordsRequester: true, localApply: "broad"})
	operatorConfig := chartToken(ctx, t, fleet.Hub.Config)
	operatorClient, err := client.New(operatorConfig, client.Options{Scheme: h.admin.Scheme()})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	h.operator = testfleet.Retrying(operatorClient)
	op, err := testoperator.Start(ctx, fleet, testoperator.Options{
		HubConfig: operatorConfig,
		// Content nothing names is collected within seconds: the test watches it go.
		Configure: func(o *operator.Options) { o.AgentTimeout, o.ContentGracePeriod = 4*time.Second, 2*time.Second },
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.stopAgent(t)
		cancel()
		<-op.Stopped
		if err := fleet.Stop(); err != nil {
			t.Error(err)
		}
	})
	h.dumpOnFailure(t)
	h.enrollPush(t)
	h.enrollPull(t)
	h.startAgent(t, "")
	return h
}

// enrollPush enrolls the push member with an admin kubeconfig, in the main wave.
func (h *pullHub) enrollPush(t *testing.T) {
	t.Helper()
	m := h.pushMember
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: testoperator.Namespace,
			Labels: map[string]string{vidrav1alpha1.ClusterLabel: m.Name, "tier": "edge", "ring": "main"}},
		Data: map[string][]byte{vidrav1alpha1.KubeconfigKey: m.Kubeconfig},
	}
	if err := h.admin.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

// enrollPull enrolls the pull member as kubectl vidra enroll --pull does, narrowed to
// appNamespace and CRDs, in the canary wave.
func (h *pullHub) enrollPull(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	m := h.pullMember
	hub := clientcmdapi.NewCluster()
	hub.Server, hub.CertificateAuthorityData = h.fleet.Hub.Config.Host, h.fleet.Hub.Config.CAData
	h.enrollment = pull.Enrollment{
		Cluster:         m.Name,
		Labels:          map[string]string{vidrav1alpha1.ClusterLabel: m.Name, "tier": "edge", "ring": "canary"},
		SecretNamespace: testoperator.Namespace,
		AgentNamespace:  testoperator.AgentNamespace,
		Delivery: identity.Spec{ServiceAccount: identity.DefaultServiceAccount, Namespaces: []string{appNamespace},
			ClusterKinds: []identity.ClusterKind{{
				Kind:     schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"},
				Resource: schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"},
			}}},
		Hub:      hub,
		TokenTTL: time.Hour,
		Operator: types.NamespacedName{Namespace: testoperator.Namespace, Name: chartOperator},
	}
	if _, err := pull.Enroll(ctx, h.admin, m.Client, h.enrollment); err != nil {
		t.Fatal(err)
	}
	if err := h.admin.Create(ctx, h.enrollment.EnrollmentSecret()); err != nil {
		t.Fatal(err)
	}
}

// startAgent runs the pull member's agent, as its own ServiceAccount; version, when set,
// is the version it reports; configure, when set, changes its options.
func (h *pullHub) startAgent(t *testing.T, version string, configure ...func(*operator.Options)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg, err := testoperator.AgentConfig(ctx, h.pullMember)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	agent, err := testoperator.StartAgent(ctx, cfg, func(o *operator.Options) {
		if version != "" {
			o.Version = version
		}
		for _, c := range configure {
			c(o)
		}
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	h.agentStop, h.agent, h.agentVersion = cancel, agent, version
}

// stopAgent stops the agent, as a pod that goes away.
func (h *pullHub) stopAgent(t *testing.T) {
	t.Helper()
	if h.agentStop == nil {
		return
	}
	h.agentStop()
	<-h.agent.Stopped
	h.agentStop, h.agent = nil, nil
}

// cluster waits until the VidraCluster of name satisfies ok, and returns it.
func (h *pullHub) cluster(t *testing.T, name, what string, ok func(*vidrav1alpha1.VidraCluster) bool) *vidrav1alpha1.VidraCluster {
	t.Helper()
	vc := &vidrav1alpha1.VidraCluster{}
	testfleet.Eventually(t, objectsTimeout, "VidraCluster "+name+" "+what, func() (bool, error) {
		err := h.admin.Get(context.Background(), client.ObjectKey{Name: name}, vc)
		return err == nil && ok(vc), client.IgnoreNotFound(err)
	})
	return vc
}

// resource waits until the hub's VidraResource name satisfies ok, and returns it.
func (h *pullHub) resource(t *testing.T, name, what string, ok func(*vidrav1alpha1.VidraResource) bool) *vidrav1alpha1.VidraResource {
	t.Helper()
	return h.resourceWithin(t, objectsTimeout, name, what, ok)
}

// resourceWithin waits up to timeout until ok holds of the hub's VidraResource name.
func (h *pullHub) resourceWithin(t *testing.T, timeout time.Duration, name, what string, ok func(*vidrav1alpha1.VidraResource) bool) *vidrav1alpha1.VidraResource {
	t.Helper()
	vr := &vidrav1alpha1.VidraResource{}
	testfleet.Eventually(t, timeout, "VidraResource "+name+" "+what, func() (bool, error) {
		err := h.admin.Get(context.Background(), client.ObjectKey{Name: name}, vr)
		return err == nil && ok(vr), client.IgnoreNotFound(err)
	})
	return vr
}

// ready says a VidraResource is Ready for its current generation.
func ready(vr *vidrav1alpha1.VidraResource) bool {
	c := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == vr.Generation && vr.Status.ObservedGeneration == vr.Generation
}

// webValue waits until the ConfigMap apps/web on c holds want under key "value".
func webValue(t *testing.T, c *testfleet.Cluster, want string) {
	ns, name := appNamespace, "web"
	t.Helper()
	testfleet.Eventually(t, objectsTimeout, fmt.Sprintf("ConfigMap %s/%s on %s holds %q", ns, name, c.Name, want), func() (bool, error) {
		cm := &corev1.ConfigMap{}
		err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm)
		return err == nil && cm.Data["value"] == want, client.IgnoreNotFound(err)
	})
}

// agentHubClient is a hub client with the agent's own token, as the agent keeps it.
func (h *pullHub) agentHubClient(t *testing.T) client.Client {
	t.Helper()
	s := &corev1.Secret{}
	if err := h.pullMember.Client.Get(context.Background(), client.ObjectKey{Namespace: testoperator.AgentNamespace, Name: vidrav1alpha1.AgentSecretName}, s); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data[vidrav1alpha1.AgentSecretKubeconfigKey])
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: h.admin.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// vidraResource creates a VidraResource on the hub for cluster, deleted with the test.
func (h *pullHub) vidraResource(t *testing.T, name, cluster, manifest string, ref *vidrav1alpha1.ContentReference) {
	t.Helper()
	vr := &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: vidrav1alpha1.VidraResourceSpec{Destination: vidrav1alpha1.Destination{Cluster: cluster, Namespace: appNamespace, ReconcileOnEvents: true},
			Manifest: manifest, Content: ref},
	}
	// Right after the chart is installed, its admission policy may answer 503 a while.
	testfleet.Eventually(t, objectsTimeout, "VidraResource "+name+" created", func() (bool, error) {
		err := h.admin.Create(context.Background(), vr)
		if apierrors.IsServiceUnavailable(err) {
			return false, nil
		}
		return err == nil, err
	})
	// Gone before the next test looks at the member's copies.
	t.Cleanup(func() {
		if err := h.admin.Delete(context.Background(), vr); err == nil {
			h.deleteResource(t, name)
		}
	})
}

func appConfigMap(name, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  value: %q\n", name, appNamespace, value)
}

// widgetBundle is a CRD of a brand-new API group with a resource of it: the first time a
// member meets the group is in this bundle.
const widgetBundle = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.pull.example
spec:
  group: pull.example
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              x-kubernetes-preserve-unknown-fields: true
---
apiVersion: pull.example/v1
kind: Widget
metadata:
  name: first
  namespace: apps
spec:
  size: 3
`

// dumpOnFailure logs, when the test failed, how the syncs, VidraResources, bundles and
// the agent's copies stood: what a failure in CI needs to be understood.
func (h *pullHub) dumpOnFailure(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx := context.Background()
		var syncs vidrav1alpha1.InfrahubSyncList
		if err := h.admin.List(ctx, &syncs); err == nil {
			for _, s := range syncs.Items {
				t.Logf("InfrahubSync %s: conditions %+v rollout %+v", s.Name, s.Status.Conditions, s.Status.Rollout)
			}
		}
		var helmSyncs vidrav1alpha1.HelmSyncList
		if err := h.admin.List(ctx, &helmSyncs); err == nil {
			for _, s := range helmSyncs.Items {
				t.Logf("HelmSync %s: conditions %+v", s.Name, s.Status.Conditions)
			}
		}
		var vrs vidrav1alpha1.VidraResourceList
		if err := h.admin.List(ctx, &vrs); err == nil {
			for _, vr := range vrs.Items {
				t.Logf("hub VidraResource %s (gen %d) cluster %q: %+v", vr.Name, vr.Generation, vr.Status.Cluster, vr.Status.Conditions)
			}
		}
		var bundles vidrav1alpha1.VidraBundleList
		if err := h.admin.List(ctx, &bundles); err == nil {
			for _, b := range bundles.Items {
				t.Logf("VidraBundle %s/%s hub-generation %s: reported %d %+v", b.Namespace, b.Name, b.Annotations[vidrav1alpha1.HubGenerationAnnotation], b.Status.HubGeneration, b.Status.Conditions)
			}
		}
		var copies vidrav1alpha1.VidraResourceList
		if err := h.pullMember.Client.List(ctx, &copies); err == nil {
			for _, vr := range copies.Items {
				t.Logf("member VidraResource %s (gen %d): %+v", vr.Name, vr.Generation, vr.Status.Conditions)
			}
		}
		var clusters vidrav1alpha1.VidraClusterList
		if err := h.admin.List(ctx, &clusters); err == nil {
			for _, vc := range clusters.Items {
				t.Logf("VidraCluster %s: %s %s %q agent %+v", vc.Name, vc.Status.Mode, vc.Status.Phase, vc.Status.Message, vc.Status.Agent)
			}
		}
	})
}
