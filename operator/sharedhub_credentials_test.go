package operator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

// credentialsAreTheirOwners is tried as a tenant would: tenant-a, who may write syncs and
// deliver to member 0, names another team's Secret in the operator's namespace and a
// server of its own. Before, the operator sent that team's token there; now it sends
// nothing until the tenant may use the Secret and the Secret lists the URL.
func (h *sharedHub) credentialsAreTheirOwners(t *testing.T) {
	ctx := context.Background()
	const stolen = "team-b-stolen-token"
	own := infrahubtest.New(infrahubtest.Options{Token: "tenant-a-token"})
	t.Cleanup(own.Close)
	own.Put("main", infrahubtest.Artifact{
		ID: "tenant-a-1", Name: "tenant-a", TargetLabel: "t1", DefinitionName: "tenant-a",
		Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-infrahub\n  namespace: team-a\ndata:\n  v: \"1\"\n",
	})
	teamB := h.credentialsSecret(t, "team-b-infrahub", stolen, "https://infrahub.team-b.example")
	sync := &vidrav1alpha1.InfrahubSync{ObjectMeta: metav1.ObjectMeta{Name: "tenant-borrows"}, Spec: vidrav1alpha1.InfrahubSyncSpec{
		Source: vidrav1alpha1.InfrahubSyncSource{
			InfrahubAPIURL: own.URL(), InsecureAllowHTTP: true, ArtefactName: "tenant-a",
			CredentialsSecretRef: &vidrav1alpha1.SecretReference{Namespace: testoperator.Namespace, Name: teamB},
		},
		Destination: vidrav1alpha1.InfrahubSyncDestination{Destination: vidrav1alpha1.Destination{Cluster: h.fleet.Members[0].Name}},
		Interval:    &metav1.Duration{Duration: time.Hour},
		// The sync's work on the hub is what is asserted, not the member's: there an
		// earlier case left namespace team-a terminating (no namespace controller runs).
		Wait: ptr.To(false),
	}}
	// Without use on it: refused at kubectl apply, naming the Secret and the right.
	refused(t, h.tenant.Create(ctx, sync.DeepCopy()),
		tenantUser+" may not have the operator use a Secret without the right to use it", testoperator.Namespace+"/"+teamB, "use on that Secret")

	// Granted use by mistake, the Secret still goes only where it lists.
	grant(t, h.admin, vidrav1alpha1.UseVerb, "secrets", teamB)
	if err := h.tenant.Create(ctx, sync); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, sync)
	if who := sync.Annotations[vidrav1alpha1.RequestedByAnnotation]; who != tenantUser {
		t.Errorf("requested-by %q, want %q recorded by admission", who, tenantUser)
	}
	h.syncStalled(t, sync.Name, vidrav1alpha1.ReasonCredentialsRefused,
		"may be sent only to https://infrahub.team-b.example", "not to "+own.URL())
	if n := own.GraphQLRequests(); n != 0 {
		t.Fatalf("the tenant's server heard %d requests carrying another team's credentials", n)
	}

	// Its own Secret, listing its server and granted to it: delivered.
	mine := h.credentialsSecret(t, "tenant-a-infrahub", "tenant-a-token", own.URL())
	grant(t, h.admin, vidrav1alpha1.UseVerb, "secrets", mine)
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"source":{"credentialsSecretRef":{"name":%q}}}}`, mine))
	if err := h.tenant.Patch(ctx, sync, patch); err != nil {
		t.Fatal(err)
	}
	h.syncCondition(t, sync.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonSucceeded)
	if own.GraphQLRequests() == 0 {
		t.Error("the sync reported Ready without asking its server")
	}
}

// credentialsSecret creates, as an admin, a Secret of the operator's namespace holding an
// Infrahub token that may be sent to the URL given.
func (h *sharedHub) credentialsSecret(t *testing.T, name, token, allowedURL string) string {
	t.Helper()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testoperator.Namespace, Name: name, Annotations: map[string]string{
			vidrav1alpha1.AllowedURLsAnnotation: allowedURL,
		}},
		StringData: map[string]string{"apiToken": token},
	}
	if err := h.admin.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, secret)
	return name
}

// syncCondition waits until the InfrahubSync's condition has the reason, for its
// generation, with a message saying all of want, and returns the message.
func (h *sharedHub) syncCondition(t *testing.T, name, condition, reason string, want ...string) string {
	t.Helper()
	var msg string
	testfleet.Eventually(t, objectsTimeout, "InfrahubSync "+name+" "+condition+" "+reason+" saying "+strings.Join(want, ", "), func() (bool, error) {
		ihs := &vidrav1alpha1.InfrahubSync{}
		if err := h.admin.Get(context.Background(), client.ObjectKey{Name: name}, ihs); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(ihs.Status.Conditions, condition)
		if c == nil || c.Reason != reason || c.ObservedGeneration != ihs.Generation {
			return false, fmt.Errorf("generation %d, conditions %+v", ihs.Generation, ihs.Status.Conditions)
		}
		for _, w := range want {
			if !strings.Contains(c.Message, w) {
				return false, fmt.Errorf("%s: %q", condition, c.Message)
			}
		}
		msg = c.Message
		return true, nil
	})
	return msg
}

// syncStalled waits until the InfrahubSync is Stalled for the reason with a message
// saying all of want, and no credential.
func (h *sharedHub) syncStalled(t *testing.T, name, reason string, want ...string) {
	t.Helper()
	if msg := h.syncCondition(t, name, vidrav1alpha1.ConditionStalled, reason, want...); strings.Contains(msg, "stolen-token") {
		t.Errorf("a credential shows in status: %q", msg)
	}
}

// alertProvidersUseOnlyTheirSecrets: an AlertProvider sends its Secret's token to its
// address, so a tenant may name only a Secret it may use, and the operator (with the
// chart's rights) sends it only to a URL the Secret lists.
func (h *sharedHub) alertProvidersUseOnlyTheirSecrets(t *testing.T) {
	ctx := context.Background()
	teamB := h.credentialsSecret(t, "team-b-alerts", "team-b-hmac-key", "https://alerts.team-b.example/")
	provider := &vidrav1alpha1.AlertProvider{ObjectMeta: metav1.ObjectMeta{Name: "tenant-alerts"}, Spec: vidrav1alpha1.AlertProviderSpec{
		Type: vidrav1alpha1.AlertProviderGenericHMAC, Address: "https://alerts.tenant-a.example/hook",
		SecretRef: &vidrav1alpha1.LocalSecretReference{Name: teamB},
	}}
	refused(t, h.tenant.Create(ctx, provider.DeepCopy()),
		tenantUser+" may not have the operator send Secret "+testoperator.Namespace+"/"+teamB, "the verb use on that Secret")

	grant(t, h.admin, vidrav1alpha1.UseVerb, "secrets", teamB)
	if err := h.tenant.Create(ctx, provider); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, provider)
	if who := provider.Annotations[vidrav1alpha1.RequestedByAnnotation]; who != tenantUser {
		t.Errorf("requested-by %q, want %q recorded by admission", who, tenantUser)
	}
	testfleet.Eventually(t, objectsTimeout, "the provider refused: the Secret lists another URL", func() (bool, error) {
		if err := h.admin.Get(ctx, client.ObjectKeyFromObject(provider), provider); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(provider.Status.Conditions, vidrav1alpha1.ConditionReady)
		return c != nil && c.Reason == vidrav1alpha1.ReasonCredentialsRefused &&
			strings.Contains(c.Message, "may be sent only to https://alerts.team-b.example/"), nil
	})
}
