package sourcesync_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
	"github.com/vidra-operator/vidra/internal/test/sopstest"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// dbSecret is a Secret whose password names its cluster's ring: decrypted first, then
// substituted, as Flux orders them.
func dbSecret(password string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: %s-${cluster.labels.ring}\n", password)
}

// A GitSync's spec.decryption decrypts the SOPS-encrypted Secrets of its repository with
// the age identities of a Secret, before postBuild: each member gets its plain Secret,
// while on the hub the plain text is only in the content store's Secrets, never in a
// VidraResource, a status, a ControllerRevision or an Event, nor any digest of it. A
// wrong key stops the sync, naming the object and the recipients, and what was
// delivered stays; the right key again delivers the newest commit.
func TestDecryptionDeliversSOPSSecretsThatTheHubNeverShows(t *testing.T) {
	const ns = "gs-decrypt"
	createNamespace(t, ns)
	first, second := fleet.Members[0], fleet.Members[1]
	labelCluster(t, first, map[string]string{"ring": "blue"})
	labelCluster(t, second, map[string]string{"ring": "green"})
	id := sopstest.NewIdentity(t)
	createSecret(t, "sops-age", map[string][]byte{"identity.agekey": []byte(id.String())})
	srv := gitserver.New(t)
	repo := srv.Repo(t, "decrypt")
	encrypted := sopstest.Encrypt(t, []byte(dbSecret("hunter2")), sopstest.SecretValues, id.Recipient().String())
	repo.Commit(t, "main", map[string]string{"deploy/db.enc.yaml": string(encrypted), "deploy/app.yaml": configMap("app", "v1")}, "db")
	gs := gitSync("decrypt", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Source.Path = "deploy"
		gs.Spec.Destination = everyMember(ns)
		gs.Spec.Decryption = &vidrav1alpha1.Decryption{Provider: vidrav1alpha1.DecryptionProviderSOPS, SecretRef: vidrav1alpha1.LocalSecretReference{Name: "sops-age"}}
		gs.Spec.PostBuild = &vidrav1alpha1.PostBuild{}
	})
	create(t, gs)
	ready(t, gs)
	for m, ring := range map[*testfleet.Cluster]string{first: "blue", second: "green"} {
		waitSecret(t, m, ns, "db", "password", "hunter2-"+ring)
	}
	hubShowsNoPlainText(t, gs, "hunter2")

	// The Secret's identity replaced by another: the sync stops, the members keep theirs.
	wrong := sopstest.NewIdentity(t)
	setSecretData(t, "sops-age", map[string][]byte{"identity.agekey": []byte(wrong.String())})
	repo.Commit(t, "main", map[string]string{"deploy/db.enc.yaml": string(sopstest.Encrypt(t, []byte(dbSecret("swordfish")), sopstest.SecretValues, id.Recipient().String()))}, "rotate")
	requestSync(t, gs)
	condition(t, gs, vidrav1alpha1.ConditionStalled, metav1.ConditionTrue, vidrav1alpha1.ReasonDecryptionFailed)
	if msg := readyMessage(gs); !containsAll(msg, "spec.decryption with Secret "+namespace+"/sops-age", "Secret db", "no age identity", id.Recipient().String()) {
		t.Errorf("Ready says %q, want the object, the Secret and the recipient named", msg)
	}
	time.Sleep(2 * time.Second) // a wrong delivery would have begun
	for m, ring := range map[*testfleet.Cluster]string{first: "blue", second: "green"} {
		if got := secretValue(t, m, ns, "db", "password"); got != "hunter2-"+ring {
			t.Errorf("%s: password %q, want what was delivered kept", m.Name, got)
		}
	}

	// A Secret without an identity says so.
	setSecretData(t, "sops-age", map[string][]byte{"identity.txt": []byte(id.String())})
	requestSync(t, gs)
	testfleet.Eventually(t, 60*time.Second, "the sync to say the Secret holds no identity", func() (bool, error) {
		err := fleet.Hub.Client.Get(context.Background(), client.ObjectKeyFromObject(gs), gs)
		return err == nil && strings.Contains(readyMessage(gs), "no key ending in .agekey"), err
	})

	// The right identity again: the newest commit goes out.
	setSecretData(t, "sops-age", map[string][]byte{"identity.agekey": []byte(id.String())})
	requestSync(t, gs)
	for m, ring := range map[*testfleet.Cluster]string{first: "blue", second: "green"} {
		waitSecret(t, m, ns, "db", "password", "swordfish-"+ring)
	}
	// Asked once more: on a loaded machine the sync may miss its VidraResources turning
	// Ready after a stall (noted on issue 73) and wait for its interval; what is tested
	// here is the delivery above and what the hub shows below.
	requestSync(t, gs)
	ready(t, gs)
	hubShowsNoPlainText(t, gs, "swordfish")
}

// hubShowsNoPlainText checks that what the hub shows of a sync to readers of its kinds
// holds neither the plain value nor a digest of the plain bundle: its VidraResources name
// sealed content, which reads back as plain text only from the store's Secrets.
func hubShowsNoPlainText(t *testing.T, gs *vidrav1alpha1.GitSync, plain string) {
	t.Helper()
	ctx := context.Background()
	store := &content.Store{Client: fleet.Hub.Client, Reader: fleet.Hub.Client, Namespace: namespace}
	shown := []any{gs}
	for _, vr := range resourcesOf(t, gs) {
		shown = append(shown, vr)
		if vr.Spec.Manifest != "" || vr.Spec.Content == nil {
			t.Fatalf("VidraResource %s holds its decrypted bundle inline", vr.Name)
		}
		data, err := store.Get(ctx, vr.Spec.Content.Digest)
		if err != nil || !strings.Contains(string(data), plain) {
			t.Fatalf("the content VidraResource %s names is not the decrypted bundle: %v", vr.Name, err)
		}
		for _, hash := range []string{strings.TrimPrefix(content.Digest(data), "sha256:"), content.MD5(data)} {
			for _, o := range resourcesOf(t, gs) {
				if mustJSON(t, o, hash) || mustJSON(t, gs, hash) {
					t.Errorf("a hash of the plain bundle is shown on %s", o.Name)
				}
			}
		}
	}
	var revisions appsv1.ControllerRevisionList
	var events eventsv1.EventList
	if err := fleet.Hub.Client.List(ctx, &revisions, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	if err := fleet.Hub.Client.List(ctx, &events); err != nil {
		t.Fatal(err)
	}
	shown = append(shown, revisions, events)
	for _, o := range shown {
		if mustJSON(t, o, plain) {
			t.Errorf("the plain value %q is shown on the hub in %T", plain, o)
		}
	}
}

// mustJSON says whether o's JSON holds s.
func mustJSON(t *testing.T, o any, s string) bool {
	t.Helper()
	data, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(data), s)
}

// setSecretData replaces the data of a Secret of the operator's namespace.
func setSecretData(t *testing.T, name string, data map[string][]byte) {
	t.Helper()
	secret := &corev1.Secret{}
	if err := fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Data = data
	if err := fleet.Hub.Client.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
}

// secretValue reads a key of a Secret's data on c ("" when absent).
func secretValue(t testing.TB, c *testfleet.Cluster, ns, name, key string) string {
	t.Helper()
	secret := &corev1.Secret{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, secret); err != nil {
		return ""
	}
	return string(secret.Data[key])
}

func waitSecret(t testing.TB, c *testfleet.Cluster, ns, name, key, want string) {
	t.Helper()
	testfleet.Eventually(t, 60*time.Second, fmt.Sprintf("Secret %s/%s on %s with %s %q", ns, name, c.Name, key, want), func() (bool, error) {
		return secretValue(t, c, ns, name, key) == want, nil
	})
}
