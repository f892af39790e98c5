package operator_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/policy"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

// A hub shared by teams, with the operator holding exactly the chart's rights: RBAC
// decides who delivers where, at kubectl apply, by any route; the operator's own rights
// are no back door to the hub; a cluster's delivery policy holds for previews and at once.
func TestSharedHub(t *testing.T) {
	h := startSharedHub(t)
	ctx := context.Background()
	m0, m1 := h.fleet.Members[0], h.fleet.Members[1]

	t.Run("a user with deliver on one member delivers there, and admission records who asked", func(t *testing.T) {
		vr := bundle("tenant-own", vidrav1alpha1.Destination{Cluster: m0.Name, Namespace: "team-a"}, configMap("own", "hello"))
		if err := h.tenant.Create(ctx, vr); err != nil {
			t.Fatal(err)
		}
		cleanup(t, h.admin, vr)
		got := h.waitFor(t, vr.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonSucceeded)
		if who := got.Annotations[vidrav1alpha1.RequestedByAnnotation]; who != tenantUser {
			t.Errorf("requested-by %q, want %q", who, tenantUser)
		}
		cm := &corev1.ConfigMap{}
		if err := m0.Client.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "own"}, cm); err != nil {
			t.Fatal(err)
		}
		// Its server URL names the same cluster: the operator asks the API server, which agrees.
		bySrv := bundle("tenant-own-by-server", vidrav1alpha1.Destination{Server: m0.Server(), Namespace: "team-a"}, configMap("own-by-server", "hello"))
		if err := h.tenant.Create(ctx, bySrv); err != nil {
			t.Fatal(err)
		}
		cleanup(t, h.admin, bySrv)
		h.waitFor(t, bySrv.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonSucceeded)
	})

	t.Run("and nowhere else, by any route, and is told why", func(t *testing.T) {
		refused(t, h.tenant.Create(ctx, bundle("tenant-other", vidrav1alpha1.Destination{Cluster: m1.Name}, configMap("x", "y"))),
			tenantUser+" may not deliver to cluster "+m1.Name, "deliver on vidraclusters named "+m1.Name)
		refused(t, h.tenant.Create(ctx, bundle("tenant-hub", vidrav1alpha1.Destination{}, configMap("x", "y"))),
			tenantUser+" may not deliver to cluster local")
		refused(t, h.tenant.Create(ctx, bundle("tenant-hub-url", vidrav1alpha1.Destination{Server: "https://KUBERNETES.default.svc:443/"}, configMap("x", "y"))),
			tenantUser+" may not deliver to cluster local")
		for name, dest := range map[string]vidrav1alpha1.InfrahubSyncDestination{
			"tenant-sync-selector": {ClusterSelector: &metav1.LabelSelector{}},
			"tenant-sync-targets":  {ClusterFromTarget: true},
			"tenant-sync-other":    {Destination: vidrav1alpha1.Destination{Cluster: m1.Name}},
		} {
			sync := &vidrav1alpha1.InfrahubSync{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: vidrav1alpha1.InfrahubSyncSpec{
				Source:      vidrav1alpha1.InfrahubSyncSource{InfrahubAPIURL: "https://infrahub.example.com", TargetBranch: "main", ArtefactName: "a"},
				Destination: dest,
			}}
			refused(t, h.tenant.Create(ctx, sync), tenantUser+" may not deliver to")
		}
		// GitSyncs and OCISyncs are checked as InfrahubSyncs are.
		for name, dest := range map[string]vidrav1alpha1.SyncDestination{
			"selector": {ClusterSelector: &metav1.LabelSelector{}},
			"other":    {Destination: vidrav1alpha1.Destination{Cluster: m1.Name}},
			"hub":      {},
		} {
			opts := vidrav1alpha1.SyncOptions{Destination: dest}
			git := &vidrav1alpha1.GitSync{ObjectMeta: metav1.ObjectMeta{Name: "tenant-git-" + name}, Spec: vidrav1alpha1.GitSyncSpec{
				Source: vidrav1alpha1.GitSource{URL: "https://git.example.com/r.git"}, SyncOptions: opts}}
			refused(t, h.tenant.Create(ctx, git), tenantUser+" may not deliver to")
			oci := &vidrav1alpha1.OCISync{ObjectMeta: metav1.ObjectMeta{Name: "tenant-oci-" + name}, Spec: vidrav1alpha1.OCISyncSpec{
				Source: vidrav1alpha1.OCISource{URL: "oci://registry.example.com/r"}, SyncOptions: opts}}
			refused(t, h.tenant.Create(ctx, oci), tenantUser+" may not deliver to")
		}
		own := &vidrav1alpha1.GitSync{ObjectMeta: metav1.ObjectMeta{Name: "tenant-git-own"}, Spec: vidrav1alpha1.GitSyncSpec{
			Source: vidrav1alpha1.GitSource{URL: "https://git.example.com/r.git"}, SyncOptions: vidrav1alpha1.SyncOptions{
				Destination: vidrav1alpha1.SyncDestination{Destination: vidrav1alpha1.Destination{Cluster: m0.Name}}, Suspend: true}}}
		if err := h.tenant.Create(ctx, own); err != nil {
			t.Errorf("a GitSync to the tenant's own cluster is refused: %v", err)
		}
		cleanup(t, h.admin, own)
		// A Secret the tenant may not read is not theirs to have the operator send anywhere.
		withSecret := own.DeepCopy()
		withSecret.Spec.Source.SecretRef = &vidrav1alpha1.LocalSecretReference{Name: "other-team-git"}
		refused(t, h.tenant.Patch(ctx, withSecret, client.MergeFrom(own)),
			tenantUser+" may not have the operator use a Secret without the right to use it", testoperator.Namespace+"/other-team-git", "use on that Secret")
		grant(t, h.admin, vidrav1alpha1.UseVerb, "secrets", "tenant-git")
		withOwn := own.DeepCopy()
		withOwn.Spec.Source.SecretRef = &vidrav1alpha1.LocalSecretReference{Name: "tenant-git"}
		if err := h.tenant.Patch(ctx, withOwn, client.MergeFrom(own)); err != nil {
			t.Errorf("a Secret the tenant may read is refused: %v", err)
		}
		// Nor are a Secret or a ConfigMap it may not read its to substitute in a bundle.
		grant(t, h.admin, "get", "configmaps", "tenant-git-vars")
		for _, tc := range []struct {
			ref  vidrav1alpha1.SubstituteReference
			want []string
		}{
			{vidrav1alpha1.SubstituteReference{Kind: "Secret", Name: "other-team-git"}, []string{"use on that Secret", testoperator.Namespace + "/other-team-git"}},
			{vidrav1alpha1.SubstituteReference{Kind: "ConfigMap", Name: "other-team-vars"}, []string{"may not have the operator render a ConfigMap it may not read", testoperator.Namespace + "/other-team-vars"}},
			{vidrav1alpha1.SubstituteReference{Kind: "Secret", Name: "tenant-git"}, nil},
			{vidrav1alpha1.SubstituteReference{Kind: "ConfigMap", Name: "tenant-git-vars"}, nil},
		} {
			ref, want := tc.ref, tc.want
			withVars := withOwn.DeepCopy()
			withVars.Spec.PostBuild = &vidrav1alpha1.PostBuild{SubstituteFrom: []vidrav1alpha1.SubstituteReference{ref}}
			err := h.tenant.Patch(ctx, withVars, client.MergeFrom(withOwn))
			switch {
			case want != nil:
				refused(t, err, want...)
			case err != nil:
				t.Errorf("postBuild.substituteFrom %s %s, which the tenant may read, is refused: %v", ref.Kind, ref.Name, err)
			}
		}
		// Nor a Secret of age identities to decrypt with.
		withKeys := withOwn.DeepCopy()
		withKeys.Spec.Decryption = &vidrav1alpha1.Decryption{Provider: vidrav1alpha1.DecryptionProviderSOPS,
			SecretRef: vidrav1alpha1.LocalSecretReference{Name: "other-team-sops"}}
		refused(t, h.tenant.Patch(ctx, withKeys, client.MergeFrom(withOwn)), "use on that Secret", testoperator.Namespace+"/other-team-sops")
		withKeys.Spec.Decryption.SecretRef.Name = "tenant-git"
		if err := h.tenant.Patch(ctx, withKeys, client.MergeFrom(withOwn)); err != nil {
			t.Errorf("spec.decryption with a Secret the tenant may use is refused: %v", err)
		}
		// A merge patch, not an update: the operator writes the sync's status meanwhile.
		moved := withOwn.DeepCopy()
		moved.Spec.Destination = vidrav1alpha1.SyncDestination{Destination: vidrav1alpha1.Destination{Cluster: m1.Name}}
		refused(t, h.tenant.Patch(ctx, moved, client.MergeFrom(withOwn)), tenantUser+" may not deliver to cluster "+m1.Name)
		// A server URL names its cluster only to the operator: admitted, then refused whole.
		bySrv := bundle("tenant-other-by-server", vidrav1alpha1.Destination{Server: m1.Server(), Namespace: "team-a"}, configMap("sneaked", "in"))
		if err := h.tenant.Create(ctx, bySrv); err != nil {
			t.Fatal(err)
		}
		cleanup(t, h.admin, bySrv)
		h.refusedWhole(t, bySrv.Name, tenantUser+", who last changed it, may not deliver to cluster "+m1.Name, policy.DeliverRight(m1.Name))
		if err := m1.Client.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "sneaked"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("the refused bundle reached %s: %v", m1.Name, err)
		}
		// Someone else's bundle on another cluster: neither changed nor deleted.
		theirs := bundle("admin-on-other", vidrav1alpha1.Destination{Cluster: m1.Name, Namespace: "team-b"}, configMap("theirs", "v1"))
		if err := h.admin.Create(ctx, theirs); err != nil {
			t.Fatal(err)
		}
		cleanup(t, h.admin, theirs)
		h.waitFor(t, theirs.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonSucceeded)
		mine := &vidrav1alpha1.VidraResource{}
		if err := h.tenant.Get(ctx, client.ObjectKeyFromObject(theirs), mine); err != nil {
			t.Fatal(err)
		}
		mine.Spec.Manifest = configMap("theirs", "mine now")
		refused(t, h.tenant.Update(ctx, mine), "may not deliver to cluster "+m1.Name)
		refused(t, h.tenant.Delete(ctx, mine), "may not deliver to cluster "+m1.Name)
	})

	t.Run("a HelmSync delivers only where its author may, with values its author may read", func(t *testing.T) {
		h.helmSyncs(t)
	})

	t.Run("a sync names as many Secrets and ConfigMaps as the policy checks, each checked", func(t *testing.T) {
		h.manyReferences(t)
	})

	t.Run("a cluster admin still delivers anywhere, the hub included", func(t *testing.T) {
		for _, vr := range []*vidrav1alpha1.VidraResource{
			bundle("admin-member", vidrav1alpha1.Destination{Cluster: m1.Name, Namespace: "team-c"}, configMap("c", "v")),
			bundle("admin-hub", vidrav1alpha1.Destination{Namespace: "team-c"}, configMap("c", "v")),
		} {
			if err := h.admin.Create(ctx, vr); err != nil {
				t.Fatal(err)
			}
			cleanup(t, h.admin, vr)
			h.waitFor(t, vr.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonSucceeded)
		}
	})

	t.Run("a bundle changes nothing the hub keeps for itself", func(t *testing.T) {
		enrollment := &corev1.Secret{}
		if err := h.admin.Get(ctx, client.ObjectKey{Namespace: testoperator.Namespace, Name: m0.Name}, enrollment); err != nil {
			t.Fatal(err)
		}
		refused(t, h.writer.Create(ctx, bundle("writer-hub", vidrav1alpha1.Destination{}, configMap("x", "y"))),
			writerUser+" may not deliver to cluster local")
		hostile := map[string]struct {
			dest     vidrav1alpha1.Destination
			manifest string
			says     string
		}{
			"hub-enrollment": {vidrav1alpha1.Destination{}, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: " + m0.Name + "\n  namespace: " + testoperator.Namespace +
				"\n  annotations:\n    " + vidrav1alpha1.AllowedNamespacesAnnotation + ": '*'\nstringData:\n  kubeconfig: elsewhere\n", "the operator's namespaces on the hub"},
			"hub-lease": {vidrav1alpha1.Destination{Namespace: "default"}, "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: vidra-peer-planted\nspec:\n  holderIdentity: nobody\n", "Leases are never delivered to the hub"},
			"hub-vidraresource": {vidrav1alpha1.Destination{}, "apiVersion: infrahub.operators.com/v1alpha1\nkind: VidraResource\nmetadata:\n  name: second-hand\nspec:\n  destination:\n    cluster: " + m1.Name +
				"\n  manifest: |\n    apiVersion: v1\n    kind: ConfigMap\n    metadata:\n      name: second-hand\n      namespace: default\n", "Vidra's own objects are never delivered to the hub"},
			"hub-own-namespace": {vidrav1alpha1.Destination{Namespace: testoperator.Namespace}, configMap("planted", "x"), "destination namespace " + testoperator.Namespace},
		}
		for name, c := range hostile {
			vr := bundle(name, c.dest, c.manifest)
			vr.Spec.AdoptExisting = vidrav1alpha1.AdoptAlways
			if err := h.local.Create(ctx, vr); err != nil {
				t.Fatal(err)
			}
			cleanup(t, h.admin, vr)
			h.refusedWhole(t, name, c.says)
		}
		after := &corev1.Secret{}
		if err := h.admin.Get(ctx, client.ObjectKeyFromObject(enrollment), after); err != nil {
			t.Fatal(err)
		}
		if after.ResourceVersion != enrollment.ResourceVersion {
			t.Errorf("enrollment Secret %s changed: %v", m0.Name, after.Annotations)
		}
		if err := h.admin.Get(ctx, client.ObjectKey{Namespace: "default", Name: "vidra-peer-planted"}, &coordinationv1.Lease{}); !apierrors.IsNotFound(err) {
			t.Errorf("Lease planted: %v", err)
		}
		if err := h.admin.Get(ctx, client.ObjectKey{Name: "second-hand"}, &vidrav1alpha1.VidraResource{}); !apierrors.IsNotFound(err) {
			t.Errorf("VidraResource second-hand made through the hub: %v", err)
		}
		// Nor as the operator: naming its ServiceAccount needs the right to act as it.
		asOperator := bundle("as-operator", vidrav1alpha1.Destination{Namespace: testoperator.Namespace}, configMap("x", "y"))
		asOperator.Spec.ServiceAccountName = chartOperator
		refused(t, h.local.Create(ctx, asOperator), "may not deliver to the hub as ServiceAccount "+testoperator.Namespace+"/"+chartOperator)
		// Nor through the VidraResources a sync makes, which are the operator's writes.
		syncAsOperator := &vidrav1alpha1.InfrahubSync{ObjectMeta: metav1.ObjectMeta{Name: "sync-as-operator"}, Spec: vidrav1alpha1.InfrahubSyncSpec{
			Source:      vidrav1alpha1.InfrahubSyncSource{InfrahubAPIURL: "https://infrahub.example.com", TargetBranch: "main", ArtefactName: "a"},
			Destination: vidrav1alpha1.InfrahubSyncDestination{Destination: vidrav1alpha1.Destination{Namespace: testoperator.Namespace}},
			Template:    &vidrav1alpha1.VidraResourceTemplate{ServiceAccountName: chartOperator},
		}}
		refused(t, h.local.Create(ctx, syncAsOperator), "may not deliver to the hub as ServiceAccount "+testoperator.Namespace+"/"+chartOperator)
	})

	t.Run("no other spelling, deletion, retargeting, relabeling or forged requester gets around it", func(t *testing.T) {
		h.otherRoutes(t)
	})

	t.Run("no one but the operator writes a VidraCluster, whose labels place bundles", func(t *testing.T) {
		h.clusterLabelsAreTheAdmins(t)
	})

	t.Run("Kubernetes' view and edit roles neither deliver nor read bundles beyond what they hold", func(t *testing.T) {
		h.chartRolesAreNoWiderThanKubernetes(t)
	})

	t.Run("a stored bundle is delivered only by VidraResources it belongs to", func(t *testing.T) {
		h.storedContentIsItsOwners(t)
	})

	t.Run("a stamp names only who made the request, with or without the requester policy", func(t *testing.T) {
		h.stampsHoldWithoutTheRequesterPolicy(t)
	})

	t.Run("a bundle that relies on the admission policies waits while one is missing", func(t *testing.T) {
		h.bundlesWaitForThePolicies(t)
	})

	t.Run("a sync waits while a policy is missing", func(t *testing.T) {
		h.syncsWaitForThePolicies(t)
	})

	t.Run("a bundle naming a sync as its controller waits while the deliver policy is missing", func(t *testing.T) {
		h.forgedSyncBundlesWaitForThePolicies(t)
	})

	t.Run("what was written while the deliver policy was missing is checked once it is back", func(t *testing.T) {
		h.writtenMeanwhileIsCheckedOnceThePoliciesAreBack(t)
	})

	t.Run("what was written while nothing recorded who asked is not trusted once it is back", func(t *testing.T) {
		h.stampsWrittenInAGapAreNotTrusted(t)
	})

	t.Run("the operator acts on the hub only as the accounts the chart lists", func(t *testing.T) {
		h.theOperatorActsOnlyAsListedAccounts(t)
	})

	t.Run("a stamp records all of who asked, and the operator asks about all of it", func(t *testing.T) {
		h.stampsCarryAllOfWhoAsked(t)
	})

	t.Run("no one but the operator writes a status", func(t *testing.T) {
		h.statusIsTheOperators(t)
	})

	t.Run("a finalizer is a change like a label", func(t *testing.T) {
		h.finalizersAreChanges(t)
	})

	t.Run("a deleted sync goes, whether its VidraResources are orphaned or deleted first", func(t *testing.T) {
		h.aDeletedSyncGoesWhateverTheCascade(t)
	})

	t.Run("a bundle that cannot go where it names reads nothing of its content", func(t *testing.T) {
		h.rightBeforeContent(t)
	})

	t.Run("a sync's VidraResource names are its own: none is given to it, and one taken is reported", func(t *testing.T) {
		h.namesAreTheSyncsOwn(t)
	})

	t.Run("a sync uses only the Secrets its author may use, and sends them only where they may go", func(t *testing.T) {
		h.credentialsAreTheirOwners(t)
	})

	t.Run("an AlertProvider uses only a Secret its author may use, and sends it only where it may go", func(t *testing.T) {
		h.alertProvidersUseOnlyTheirSecrets(t)
	})

	t.Run("moving a bundle to another cluster is refused at apply", func(t *testing.T) {
		vr := bundle("stays", vidrav1alpha1.Destination{Cluster: m0.Name, Namespace: "team-d"}, configMap("stays", "v"))
		if err := h.admin.Create(ctx, vr); err != nil {
			t.Fatal(err)
		}
		cleanup(t, h.admin, vr)
		vr.Spec.Destination.Cluster = m1.Name
		refused(t, h.admin.Update(ctx, vr), "spec.destination.cluster and spec.destination.server cannot change", "Create a new VidraResource")
	})

	t.Run("a preview or dry run outside the policy reveals nothing of the live object", func(t *testing.T) {
		private := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "private", Namespace: "default"}, Data: map[string]string{"token": "s3cret-value"}}
		if err := m1.Client.Create(ctx, private); err != nil {
			t.Fatal(err)
		}
		testoperator.SetPolicy(t, h.admin, m1.Name, map[string]string{vidrav1alpha1.AllowedNamespacesAnnotation: "apps"})
		t.Cleanup(func() { testoperator.SetPolicy(t, h.admin, m1.Name, nil) })
		peek := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: private\n  namespace: default\ndata:\n  token: other\n"
		dry := bundle("peek-dry-run", vidrav1alpha1.Destination{Cluster: m1.Name, Namespace: "apps"}, peek)
		dry.Spec.DryRun = true
		pending := bundle("peek-preview", vidrav1alpha1.Destination{Cluster: m1.Name, Namespace: "apps"}, configMap("allowed", "v"))
		pending.Spec.Preview = &vidrav1alpha1.PendingContent{Manifest: peek, Revision: "next"}
		for _, vr := range []*vidrav1alpha1.VidraResource{dry, pending} {
			if err := h.admin.Create(ctx, vr); err != nil {
				t.Fatal(err)
			}
			cleanup(t, h.admin, vr)
		}
		h.refusedWhole(t, dry.Name, "ConfigMap default/private")
		got := h.waitFor(t, pending.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonSucceeded)
		testfleet.Eventually(t, objectsTimeout, "the pending content's preview refused", func() (bool, error) {
			if err := h.admin.Get(ctx, client.ObjectKeyFromObject(pending), got); err != nil {
				return false, err
			}
			return got.Status.Preview != nil && strings.Contains(got.Status.Preview.Message, "refused"), nil
		})
		for _, vr := range []*vidrav1alpha1.VidraResource{dry, got} {
			if err := h.admin.Get(ctx, client.ObjectKeyFromObject(vr), vr); err != nil {
				t.Fatal(err)
			}
			status, _ := json.Marshal(vr.Status)
			if strings.Contains(string(status), "s3cret") || (vr.Status.Preview != nil && len(vr.Status.Preview.Changes) > 0) {
				t.Errorf("%s's status shows the live object: %s", vr.Name, status)
			}
		}
	})

	t.Run("what the policy cannot place, and the namespace the apply would create, are refused", func(t *testing.T) {
		testoperator.SetPolicy(t, h.admin, m1.Name, map[string]string{vidrav1alpha1.AllowedNamespacesAnnotation: "apps"})
		t.Cleanup(func() { testoperator.SetPolicy(t, h.admin, m1.Name, nil) })
		unmapped := bundle("unmapped-kind", vidrav1alpha1.Destination{Cluster: m1.Name, Namespace: "apps"},
			"apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: elsewhere\n")
		if err := h.admin.Create(ctx, unmapped); err != nil {
			t.Fatal(err)
		}
		cleanup(t, h.admin, unmapped)
		h.refusedWhole(t, unmapped.Name, "Widget.example.com w", "does not serve this kind yet")

		testoperator.SetPolicy(t, h.admin, m1.Name, map[string]string{vidrav1alpha1.AllowedClusterKindsAnnotation: "ClusterRole.rbac.authorization.k8s.io"})
		fresh := bundle("fresh-namespace", vidrav1alpha1.Destination{Cluster: m1.Name, Namespace: "fresh"}, configMap("f", "v"))
		if err := h.admin.Create(ctx, fresh); err != nil {
			t.Fatal(err)
		}
		cleanup(t, h.admin, fresh)
		h.refusedWhole(t, fresh.Name, "Namespace fresh")
		if err := m1.Client.Get(ctx, client.ObjectKey{Name: "fresh"}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace fresh created on %s: %v", m1.Name, err)
		}
	})

	t.Run("a namespace removed from a cluster's policy is refused at once, whatever the new connection does", func(t *testing.T) {
		vr := bundle("narrowed", vidrav1alpha1.Destination{Cluster: m1.Name, Namespace: "narrow"}, configMap("narrowed", "v"))
		if err := h.admin.Create(ctx, vr); err != nil {
			t.Fatal(err)
		}
		cleanup(t, h.admin, vr)
		h.waitFor(t, vr.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonSucceeded)
		// Narrowed, and re-pointed at a server that does not answer: the new connection
		// never works, and the narrower policy holds anyway.
		secret := &corev1.Secret{}
		if err := h.admin.Get(ctx, client.ObjectKey{Namespace: testoperator.Namespace, Name: m1.Name}, secret); err != nil {
			t.Fatal(err)
		}
		original := secret.DeepCopy()
		t.Cleanup(func() {
			restore := &corev1.Secret{}
			if err := h.admin.Get(ctx, client.ObjectKeyFromObject(original), restore); err == nil {
				restore.Data, restore.Annotations = original.Data, original.Annotations
				_ = h.admin.Update(ctx, restore)
			}
		})
		kubeconfig, err := clientcmd.Load(secret.Data[vidrav1alpha1.KubeconfigKey])
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range kubeconfig.Clusters {
			c.Server = "https://127.0.0.1:1"
		}
		if secret.Data[vidrav1alpha1.KubeconfigKey], err = clientcmd.Write(*kubeconfig); err != nil {
			t.Fatal(err)
		}
		if secret.Annotations == nil {
			secret.Annotations = map[string]string{}
		}
		secret.Annotations[vidrav1alpha1.AllowedNamespacesAnnotation] = "other"
		if err := h.admin.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
		h.stalledBecause(t, vr.Name, "namespaces allowed: other")
		testfleet.Eventually(t, objectsTimeout, "the new kubeconfig refused, the old one kept", func() (bool, error) {
			vc := &vidrav1alpha1.VidraCluster{}
			if err := h.admin.Get(ctx, client.ObjectKey{Name: m1.Name}, vc); err != nil {
				return false, err
			}
			c := meta.FindStatusCondition(vc.Status.Conditions, vidrav1alpha1.ConditionKubeconfigCurrent)
			return c != nil && c.Status == metav1.ConditionFalse && vc.Status.Phase == vidrav1alpha1.ClusterEngaged, nil
		})
	})
}

// grant lets the tenant act (verb: get, use) on one object of a core resource (secrets,
// configmaps) of the operator's namespace.
func grant(t *testing.T, admin client.Client, verb, resource, name string) {
	t.Helper()
	const user = tenantUser
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: verb + "-" + resource + "-" + name + "-" + user, Namespace: testoperator.Namespace},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{resource}, ResourceNames: []string{name}, Verbs: []string{verb}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: testoperator.Namespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cleanup(t, admin, role, binding)
	// The API server's authorizer learns of a new binding through its own watch: admission
	// and the operator ask it, so wait until it answers yes.
	testfleet.Eventually(t, 10*time.Second, user+" may "+verb+" "+resource+"/"+name, func() (bool, error) {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: testoperator.Namespace, Verb: verb, Resource: resource, Name: name,
			},
		}}
		if err := admin.Create(ctx, review); err != nil {
			return false, err
		}
		return review.Status.Allowed, nil
	})
}
