package operator_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
	"github.com/vidra-operator/vidra/operator"
)

// sharedHub is a hub shared by teams: the chart's RBAC and admission policies installed,
// the operator running with a token of the chart's ServiceAccount, two members enrolled.
type sharedHub struct {
	fleet *testfleet.Fleet
	admin client.Client
	// tenant may write VidraResources and syncs of every kind, and deliver to member 0 only.
	tenant client.Client
	// writer may write VidraResources, and deliver nowhere.
	writer client.Client
	// local may write VidraResources and deliver to the hub (local).
	local client.Client
}

// chartRelease and the test operator's namespace give the chart's names: ServiceAccount
// vidra, local ServiceAccount vidra-local.
const (
	chartRelease   = "vidra"
	chartOperator  = "vidra"
	tenantUser     = "tenant-a"
	writerUser     = "writer"
	localUser      = "local-deliverer"
	objectsTimeout = 30 * time.Second
)

func startSharedHub(t *testing.T) *sharedHub {
	t.Helper()
	return startHub(t, true)
}

// startHub starts a shared hub whose chart is rendered as for an API server that serves
// MutatingAdmissionPolicies (recordsRequester), or as for one before Kubernetes 1.36,
// which does not: then the chart installs no requester policy, and nothing stamps who
// asked.
func startHub(t *testing.T, recordsRequester bool) *sharedHub {
	t.Helper()
	return startHubWith(t, recordsRequester, "broad")
}

// startHubWith starts a shared hub whose chart has rbac.localApply=localApply.
func startHubWith(t *testing.T, recordsRequester bool, localApply string) *sharedHub {
	t.Helper()
	helm := os.Getenv("HELM")
	if helm == "" {
		t.Skip("HELM is not set: run `make test`, or set HELM to a helm binary (make helm builds bin/tools/helm-v3.19.0)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	// The controller manager aggregates the chart's roles into view, edit and admin, and
	// its garbage collector acts as its own ServiceAccount, which holds no deliver.
	fleet, err := testfleet.Start(ctx, testfleet.Options{Members: 2, HubCRDDirectories: hubCRDs(t),
		HubControllers: []string{testfleet.ClusterRoleAggregation, testfleet.GarbageCollector}})
	if err != nil {
		t.Fatal(err)
	}
	h := &sharedHub{fleet: fleet, admin: testfleet.Retrying(fleet.Hub.Client)}
	args := installChart(ctx, t, helm, h.admin, chartValues{recordsRequester: recordsRequester, localApply: localApply})
	// The operator trusts who-asked stamps only while the chart's policies are in force.
	required := chartFlag(t, args, "required-admission-policies")
	inventories, namespaces := chartFlag(t, args, "cluster-inventory"), chartFlag(t, args, "cluster-inventory-namespaces")
	profiles := chartFlag(t, args, "publish-cluster-profiles")
	op, err := testoperator.Start(ctx, fleet, testoperator.Options{HubConfig: chartToken(ctx, t, fleet.Hub.Config),
		Configure: func(o *operator.Options) {
			o.RequiredAdmissionPolicies = required
			o.ClusterInventory, o.ClusterInventoryNamespaces = strings.Split(inventories, ","), strings.Split(namespaces, ",")
			o.PublishClusterProfiles = profiles
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		<-op.Stopped
		if err := fleet.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err := testoperator.Enroll(ctx, fleet.Hub, fleet.Members...); err != nil {
		t.Fatal(err)
	}
	h.tenant = h.user(t, tenantUser, fleet.Members[0].Name)
	h.writer = h.user(t, writerUser)
	h.local = h.user(t, localUser, vidrav1alpha1.LocalClusterName)
	// The API server applies new admission policies once its informers have them.
	testfleet.Eventually(t, objectsTimeout, "the chart's admission policies in force", func() (bool, error) {
		err := h.writer.Create(ctx, bundle("probe", vidrav1alpha1.Destination{Cluster: fleet.Members[0].Name}, configMap("probe", "x")), client.DryRunAll)
		return apierrors.IsForbidden(err) || apierrors.IsInvalid(err), nil
	})
	if recordsRequester {
		// The validating and the mutating policies come into force apart: wait for both.
		testfleet.Eventually(t, objectsTimeout, "the requester policy in force", h.stampedAs(tenantUser))
	}
	return h
}

// chartValues are the chart's values that differ between the shared hubs.
type chartValues struct {
	recordsRequester bool
	// localApply is rbac.localApply: broad also lets the operator read every object of
	// the hub, for its drift watches there.
	localApply string
}

// installChart applies what the chart renders on the hub but its Deployment and Service:
// the operator runs in the test process instead. It returns the flags the Deployment
// gives the operator.
func installChart(ctx context.Context, t *testing.T, helm string, admin client.Client, values chartValues) []string {
	t.Helper()
	root, err := testfleet.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	template := []string{"template", chartRelease, filepath.Join(root, "charts", "vidra"),
		"--namespace", testoperator.Namespace, "--set", "rbac.localApply=" + values.localApply, "--kube-version", testfleet.KubeVersion,
		"--set", "crds.install=false", // the test fleet installed the CRDs
		"--set", "clusterInventory={cluster-api,cluster-profile}", "--set", "publishClusterProfiles=" + profilesNamespace, "--set", "clusterInventoryNamespaces={" + inventoryNamespace + "}"}
	if values.recordsRequester {
		template = append(template, "--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy")
	}
	cmd := exec.CommandContext(ctx, helm, template...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template: %v: %s", err, stderr.String())
	}
	// The chart's Role in the namespace its Cluster API inventory is read from needs it.
	for _, ns := range []string{testoperator.Namespace, inventoryNamespace, profilesNamespace} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	var args []string
	for {
		o := &unstructured.Unstructured{}
		if err := decoder.Decode(&o.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if o.GetKind() == "Deployment" {
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			if len(containers) > 0 {
				args, _, _ = unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
			}
		}
		if len(o.Object) == 0 || o.GetKind() == "Deployment" || o.GetKind() == "Service" {
			continue
		}
		if err := admin.Create(ctx, o); err != nil {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	return args
}

// chartFlag is the value the chart's Deployment gives the operator's flag name.
func chartFlag(t *testing.T, args []string, name string) string {
	t.Helper()
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	t.Fatalf("the chart's Deployment sets no --%s (args %q)", name, args)
	return ""
}

// chartToken is a hub config holding a token of the chart's ServiceAccount, and nothing
// of the admin's.
func chartToken(ctx context.Context, t *testing.T, admin *rest.Config) *rest.Config {
	t.Helper()
	return serviceAccountToken(ctx, t, admin, testoperator.Namespace, chartOperator)
}

// serviceAccountToken is a config holding a token of the ServiceAccount, and nothing of
// the admin's.
func serviceAccountToken(ctx context.Context, t *testing.T, admin *rest.Config, namespace, name string) *rest.Config {
	t.Helper()
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tr.Status.Token
	cfg.QPS, cfg.Burst = admin.QPS, admin.Burst
	return cfg
}

// user provisions a person who may write VidraResources, syncs of every kind and alerts, and deliver to
// the clusters named.
func (h *sharedHub) user(t *testing.T, name string, deliverTo ...string) client.Client {
	t.Helper()
	return h.person(t, name, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}, deliverTo)
}

// person provisions a user, in the subject's group when the subject is a group, and
// binds the subject the rights user gives.
func (h *sharedHub) person(t *testing.T, name string, subject rbacv1.Subject, deliverTo []string) client.Client {
	t.Helper()
	ctx := context.Background()
	rules := []rbacv1.PolicyRule{{
		APIGroups: []string{vidrav1alpha1.GroupVersion.Group},
		Resources: []string{"vidraresources", "infrahubsyncs", "gitsyncs", "ocisyncs", "helmsyncs", "vidraclusters", "alerts", "alertproviders"},
		Verbs:     []string{"get", "list", "watch", "create", "update", "patch", "delete"},
	}}
	if len(deliverTo) > 0 {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{vidrav1alpha1.GroupVersion.Group}, Resources: []string{"vidraclusters"}, ResourceNames: deliverTo, Verbs: []string{vidrav1alpha1.DeliverVerb}})
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "team-" + name}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "team-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{subject},
	}
	for _, o := range []client.Object{role, binding} {
		if err := h.admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	var groups []string
	if subject.Kind == rbacv1.GroupKind {
		groups = append(groups, subject.Name)
	}
	return h.signIn(t, name, groups...)
}

// signIn is a client of the hub for a user in groups, with a certificate of its own.
func (h *sharedHub) signIn(t *testing.T, name string, groups ...string) client.Client {
	t.Helper()
	kubeconfig, err := h.fleet.Hub.AddUser(name, groups...)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: h.admin.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return testfleet.Retrying(c)
}

func bundle(name string, dest vidrav1alpha1.Destination, manifest string) *vidrav1alpha1.VidraResource {
	return &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       vidrav1alpha1.VidraResourceSpec{Destination: dest, Manifest: manifest},
	}
}

func configMap(name, text string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + strconv.Quote(name) + "\ndata:\n  text: " + strconv.Quote(text) + "\n"
}

// waitFor waits until the VidraResource's condition has the reason, and returns it.
func (h *sharedHub) waitFor(t *testing.T, name, condition, reason string) *vidrav1alpha1.VidraResource {
	t.Helper()
	vr := &vidrav1alpha1.VidraResource{}
	testfleet.Eventually(t, objectsTimeout, name+" "+condition+" "+reason, func() (bool, error) {
		if err := h.admin.Get(context.Background(), client.ObjectKey{Name: name}, vr); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(vr.Status.Conditions, condition)
		if c != nil && c.Reason == reason && c.ObservedGeneration == vr.Generation {
			return true, nil
		}
		return false, fmt.Errorf("generation %d, conditions %+v", vr.Generation, vr.Status.Conditions)
	})
	return vr
}

// refusedWhole waits until the VidraResource is Stalled by a policy saying all of want,
// having applied nothing.
func (h *sharedHub) refusedWhole(t *testing.T, name string, want ...string) {
	t.Helper()
	if vr := h.stalledBecause(t, name, want...); len(vr.Status.ManagedResources) > 0 {
		t.Errorf("%s refused, yet it manages %v", name, vr.Status.ManagedResources)
	}
}

// stalledBecause waits until the VidraResource is Stalled by a policy saying all of want.
func (h *sharedHub) stalledBecause(t *testing.T, name string, want ...string) *vidrav1alpha1.VidraResource {
	t.Helper()
	vr := h.waitFor(t, name, vidrav1alpha1.ConditionStalled, vidrav1alpha1.ReasonPolicyDenied)
	msg := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionStalled).Message
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%s Stalled: %q, want it to say %q", name, msg, w)
		}
	}
	return vr
}

// refused says the create was refused by the API server with a message saying all of want.
func refused(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("admitted; want it refused saying %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("refused with %q, want it to say %q", err, w)
		}
	}
}

func cleanup(t *testing.T, c client.Client, objs ...client.Object) {
	t.Cleanup(func() {
		for _, o := range objs {
			_ = c.Delete(context.Background(), o)
		}
	})
}
