package sourcesync_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/hooks"
	"github.com/vidra-operator/vidra/internal/source/gitpush"
	"github.com/vidra-operator/vidra/internal/source/infrahub"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
)

// A push notification — GitHub's, or Vidra's own signed form — fetches the GitSyncs of
// that repository at once, though their interval is an hour; a sync of another branch or
// repository is left alone. Each repository signs with a key of its own; a push within
// the repository's interval of the last waits for its turn, and is delivered then.
func TestPushWebhookFetchesAtOnce(t *testing.T) {
	const ns = "gs-push"
	createNamespace(t, ns)
	key := []byte("push-webhook-key")
	createSecret(t, "push-key", map[string][]byte{hooks.KeyField: key})
	const interval = 10 * time.Second
	receiver := &hooks.Receiver{Hub: fleet.Hub.Client, Secrets: fleet.Hub.Client,
		KeySecret: types.NamespacedName{Namespace: namespace, Name: "push-key"}, Log: logr.Discard(), PushInterval: interval}
	receiverSrv := httptest.NewServer(receiver.Handler())
	t.Cleanup(receiverSrv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go receiver.RunWaitingPushes(ctx)

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

	// GitHub's push event, signed with the repository's key.
	repoKey := gitpush.Key(key, gitpush.RepositoryKey(repo.URL()))
	second := repo.Commit(t, "main", map[string]string{"web.yaml": configMap("pushed", "v2")}, "v2")
	body := fmt.Appendf(nil, `{"ref":"refs/heads/main","after":%q,"repository":{"clone_url":%q,"html_url":"https://example.invalid/pushed","pushed_at":%d}}`,
		second, repo.URL(), time.Now().Unix())
	if code := post(t, receiverSrv.URL+hooks.GitPath, body, gitHubHeaders(repoKey, body, "delivery-1")); code != http.StatusAccepted {
		t.Fatalf("GitHub push answered %d, want 202", code)
	}
	pushed := time.Now()
	readyAt(t, main, "main@sha1:"+second)
	waitValue(t, fleet.Members[0], ns, "pushed", "v2")

	// Refused, and triggering nothing: a wrong signature; another repository's key, or
	// the key every repository shared before; a push GitHub says happened an hour ago (a
	// replay: GitHub signs no timestamp).
	stale := fmt.Appendf(nil, `{"ref":"refs/heads/main","repository":{"clone_url":%q,"pushed_at":%d}}`, repo.URL(), time.Now().Add(-time.Hour).Unix())
	for name, c := range map[string]struct {
		key  []byte
		body []byte
	}{
		"a wrong signature":        {[]byte("wrong"), body},
		"another repository's key": {gitpush.Key(key, "example.invalid/other"), body},
		"the key shared by all":    {sharedPushKey(key), body},
		"a push of an hour ago":    {repoKey, stale},
	} {
		if code := post(t, receiverSrv.URL+hooks.GitPath, c.body, gitHubHeaders(c.key, c.body, "refused")); code != http.StatusUnauthorized {
			t.Errorf("%s: answered %d, want 401", name, code)
		}
	}

	// Vidra's own form names the URL, signed as Infrahub's webhooks are. Within the
	// repository's interval of the first push, it waits for its turn.
	third := repo.Commit(t, "main", map[string]string{"web.yaml": configMap("pushed", "v3")}, "v3")
	own := fmt.Appendf(nil, `{"url":%q,"ref":"refs/heads/main"}`, repo.URL())
	ts := time.Now().Unix()
	code, answer := postAnswer(t, receiverSrv.URL+hooks.GitPath, own, map[string]string{
		infrahub.HeaderWebhookID: "own-1", infrahub.HeaderWebhookTimestamp: fmt.Sprint(ts),
		infrahub.HeaderWebhookSignature: infrahub.SignWebhook(repoKey, "own-1", ts, own),
	})
	if since := time.Since(pushed); code != http.StatusAccepted || (since < interval-time.Second && !strings.Contains(answer, "one request per repository every 10s")) {
		t.Fatalf("own push %v after the first answered %d %s, want 202, waiting for its turn", since.Round(time.Millisecond), code, answer)
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

// gitHubHeaders are the headers of GitHub's push event, body signed with key.
func gitHubHeaders(key, body []byte, delivery string) map[string]string {
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	return map[string]string{
		"X-GitHub-Event": "push", "X-GitHub-Delivery": delivery, "X-Hub-Signature-256": "sha256=" + hex.EncodeToString(mac.Sum(nil)),
	}
}

// sharedPushKey is the key every repository's pushes were signed with before each had
// its own.
func sharedPushKey(shared []byte) []byte {
	mac := hmac.New(sha256.New, shared)
	mac.Write([]byte("git-push"))
	return []byte(hex.EncodeToString(mac.Sum(nil)))
}

func post(t testing.TB, url string, body []byte, header map[string]string) int {
	t.Helper()
	code, _ := postAnswer(t, url, body, header)
	return code
}

// postAnswer posts body and returns the answer's code and body.
func postAnswer(t testing.TB, url string, body []byte, header map[string]string) (int, string) {
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
	answer, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, string(answer)
}
