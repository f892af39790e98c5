package sourcesync_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/infrahubsync"
	"github.com/vidra-operator/vidra/internal/gitpush"
	"github.com/vidra-operator/vidra/internal/infrahub"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
)

// A push notification — GitHub's, or Vidra's own signed form — fetches the GitSyncs of
// that repository at once, though their interval is an hour; a sync of another branch or
// repository is left alone.
func TestPushWebhookFetchesAtOnce(t *testing.T) {
	const ns = "gs-push"
	createNamespace(t, ns)
	key := []byte("push-webhook-key")
	createSecret(t, "push-key", map[string][]byte{infrahubsync.WebhookKeyField: key})
	receiver := &infrahubsync.Receiver{Hub: fleet.Hub.Client, Secrets: fleet.Hub.Client,
		KeySecret: types.NamespacedName{Namespace: namespace, Name: "push-key"}, Log: logr.Discard()}
	hooks := httptest.NewServer(receiver.Handler())
	t.Cleanup(hooks.Close)

	srv := gitserver.New(t)
	repo := srv.Repo(t, "pushed")
	first := repo.Commit(t, "main", map[string]string{"web.yaml": configMap("pushed", "v1")}, "v1")
	repo.Commit(t, "release", map[string]string{"web.yaml": configMap("pushed-release", "r1")}, "r1")
	main := gitSync("pushed", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Source.Ref = &vidrav1alpha1.GitRef{Branch: "main"}
		gs.Spec.Destination = toCluster(fleet.Members[0].Name, ns)
	})
	release := gitSync("pushed-release", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Source.Ref = &vidrav1alpha1.GitRef{Branch: "release"}
		gs.Spec.Destination = toCluster(fleet.Members[1].Name, ns)
	})
	create(t, main)
	create(t, release)
	readyAt(t, main, "main@sha1:"+first)
	ready(t, release)

	// GitHub's push event, signed with the shared key.
	second := repo.Commit(t, "main", map[string]string{"web.yaml": configMap("pushed", "v2")}, "v2")
	body := fmt.Appendf(nil, `{"ref":"refs/heads/main","after":%q,"repository":{"clone_url":%q,"html_url":"https://example.invalid/pushed"}}`, second, repo.URL())
	mac := hmac.New(sha256.New, gitpush.Key(key))
	mac.Write(body)
	code := post(t, hooks.URL+infrahubsync.GitPushPath, body, map[string]string{
		"X-GitHub-Event": "push", "X-GitHub-Delivery": "delivery-1", "X-Hub-Signature-256": "sha256=" + hex.EncodeToString(mac.Sum(nil)),
	})
	if code != http.StatusAccepted {
		t.Fatalf("GitHub push answered %d, want 202", code)
	}
	readyAt(t, main, "main@sha1:"+second)
	waitValue(t, fleet.Members[0], ns, "pushed", "v2")

	// A wrong signature is refused and triggers nothing.
	if code := post(t, hooks.URL+infrahubsync.GitPushPath, body, map[string]string{
		"X-GitHub-Event": "push", "X-GitHub-Delivery": "delivery-2", "X-Hub-Signature-256": "sha256=" + hex.EncodeToString(make([]byte, 32)),
	}); code != http.StatusUnauthorized {
		t.Errorf("a push with a wrong signature answered %d, want 401", code)
	}

	// Vidra's own form names the URL, signed as Infrahub's webhooks are.
	third := repo.Commit(t, "main", map[string]string{"web.yaml": configMap("pushed", "v3")}, "v3")
	own := fmt.Appendf(nil, `{"url":%q,"ref":"refs/heads/main"}`, repo.URL())
	ts := time.Now().Unix()
	if code := post(t, hooks.URL+infrahubsync.GitPushPath, own, map[string]string{
		infrahub.HeaderWebhookID: "own-1", infrahub.HeaderWebhookTimestamp: fmt.Sprint(ts),
		infrahub.HeaderWebhookSignature: infrahub.SignWebhook(gitpush.Key(key), "own-1", ts, own),
	}); code != http.StatusAccepted {
		t.Fatalf("own push answered %d, want 202", code)
	}
	readyAt(t, main, "main@sha1:"+third)
	waitValue(t, fleet.Members[0], ns, "pushed", "v3")

	// The release branch's sync was not asked: the receiver never requested it. (Its last
	// sync time says nothing: its own VidraResource's progress reconciles it.)
	if err := fleet.Hub.Client.Get(context.Background(), types.NamespacedName{Name: release.Name}, release); err != nil {
		t.Fatal(err)
	}
	if at, ok := release.Annotations[vidrav1alpha1.RequestedAtAnnotation]; ok {
		t.Errorf("a push to main requested the GitSync of branch release (at %s)", at)
	}
}

func post(t testing.TB, url string, body []byte, header map[string]string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}
