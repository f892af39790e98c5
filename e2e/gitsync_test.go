package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/source/gitpush"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// TestGitSyncDeliversARepositoryAndAPushAtOnce: a user enrolls two clusters, applies a
// GitSync of a repository served over smart HTTP, and sees its manifests on both; a push
// notification signed as GitHub signs it delivers the next commit at once, though the
// sync's interval is an hour.
func TestGitSyncDeliversARepositoryAndAPushAtOnce(t *testing.T) {
	const key = "e2e-push-key"
	webhookAddr, err := fleetenv.FreeLocalAddress()
	if err != nil {
		t.Fatal(err)
	}
	srv := gitserver.New(t)
	repo := srv.Repo(t, "platform")
	first := repo.Commit(t, "main", map[string]string{"deploy/web.yaml": gitConfigMap("v1")}, "v1")
	members := []string{"git-a", "git-b"}
	feature := features.New("a GitSync delivers a repository to the fleet, and a push at once").
		Setup(createOperatorNamespace).
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			enrollMembers(ctx, t, members, "site=git")
			kubectl(ctx, t, nil, "-n", operatorNamespace, "create", "secret", "generic", "hooks", "--from-literal=key="+key)
			return ctx
		}).
		Setup(startOperator("gitsync", "--cluster-probe-interval=1s", "--webhook-bind-address="+webhookAddr, "--infrahub-webhook-secret=hooks")).
		Assess("kubectl apply of a GitSync delivers the repository's path to every selected cluster", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			defer func() {
				if t.Failed() {
					t.Log(kubectl(ctx, t, nil, "get", "gitsyncs,vidraresources", "-o", "yaml"))
					t.Log(string(operatorFrom(ctx, "gitsync").Logs()))
				}
			}()
			kubectl(ctx, t, fmt.Appendf(nil, `apiVersion: infrahub.operators.com/v1alpha1
kind: GitSync
metadata:
  name: platform
spec:
  interval: 1h
  source:
    url: %s
    insecureAllowHTTP: true
    ref: {branch: main}
    path: deploy
  destination:
    clusterSelector: {matchLabels: {site: git}}
    namespace: default
`, repo.URL()), "apply", "-f", "-")
			for i := range members {
				waitMemberValue(ctx, t, i, "v1")
			}
			var out string
			testfleet.Eventually(t, 30*time.Second, "kubectl get gitsyncs shows the commit, Ready", func() (bool, error) {
				out = kubectl(ctx, t, nil, "get", "gitsyncs")
				return strings.Contains(out, "main@sha1:"+first) && strings.Contains(out, "True"), nil
			})
			t.Logf("kubectl get gitsyncs:\n%s", out)
			t.Logf("kubectl get vidra:\n%s", kubectl(ctx, t, nil, "get", "vidra"))
			return ctx
		}).
		Assess("a signed push delivers the next commit to every cluster at once", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			second := repo.Commit(t, "main", map[string]string{"deploy/web.yaml": gitConfigMap("v2")}, "v2")
			start := time.Now()
			sendPush(ctx, t, webhookAddr, key, repo.URL(), second)
			for i := range members {
				waitMemberValue(ctx, t, i, "v2")
			}
			t.Logf("push -> applied on %d clusters in %v; the server saw %d fetches", len(members), time.Since(start).Round(time.Millisecond), srv.Fetches("platform"))
			if n := srv.Fetches("platform"); n != 2 {
				t.Errorf("the Git server saw %d fetches for 2 commits and 2 clusters, want 2", n)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// This fleet runs no garbage collector: the VidraResources are deleted here,
			// while the operator still runs to release their objects.
			kubectl(ctx, t, nil, "delete", "gitsync", "platform")
			kubectl(ctx, t, nil, "delete", "vidraresources", "-l", "vidra.infrahub.operators.com/gitsync=platform", "--timeout=60s")
			kubectl(ctx, t, nil, "-n", operatorNamespace, "delete", "secret", "hooks", members[0], members[1])
			return ctx
		}).
		Teardown(stopOperator("gitsync")).
		Feature()
	testenv.Test(t, feature)
}

func gitConfigMap(value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: platform-web\ndata:\n  value: %q\n", value)
}

// enrollMembers enrolls the fleet's first members under names, as a user does: a
// kubeconfig Secret each, labeled to enroll it and with labels.
func enrollMembers(ctx context.Context, t *testing.T, names []string, labels ...string) {
	t.Helper()
	for i, name := range names {
		path := writeFile(t, name+".kubeconfig", fleetenv.Fleet(ctx).Members[i].Kubeconfig)
		kubectl(ctx, t, nil, "-n", operatorNamespace, "create", "secret", "generic", name, "--from-file=kubeconfig="+path)
		kubectl(ctx, t, nil, append([]string{"-n", operatorNamespace, "label", "secret", name, "vidra.infrahub.operators.com/cluster=" + name}, labels...)...)
	}
}

// waitMemberValue waits until member i has ConfigMap default/platform-web with value.
func waitMemberValue(ctx context.Context, t *testing.T, i int, value string) {
	t.Helper()
	waitMemberConfigMap(ctx, t, i, "platform-web", value)
}

// waitMemberConfigMap waits until member i has ConfigMap default/name with value.
func waitMemberConfigMap(ctx context.Context, t *testing.T, i int, name, value string) {
	t.Helper()
	member := fleetenv.Fleet(ctx).Members[i]
	testfleet.Poll(t, 10*time.Millisecond, 60*time.Second, fmt.Sprintf("ConfigMap default/%s on member %d at %s", name, i, value), func() (bool, error) {
		out, err := member.Kubectl(ctx, nil, "get", "configmap", "-n", "default", name, "-o", "jsonpath={.data.value}")
		return err == nil && out == value, nil
	})
}

// sendPush posts GitHub's push event for repoURL, signed with the key derived from the
// shared key for that repository.
func sendPush(ctx context.Context, t *testing.T, addr, key, repoURL, after string) {
	t.Helper()
	body := fmt.Appendf(nil, `{"ref":"refs/heads/main","after":%q,"repository":{"clone_url":%q}}`, after, repoURL)
	mac := hmac.New(sha256.New, gitpush.Key([]byte(key), gitpush.RepositoryKey(repoURL)))
	mac.Write(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/hooks/git", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", after)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("push: HTTP %d, want 202", resp.StatusCode)
	}
}
