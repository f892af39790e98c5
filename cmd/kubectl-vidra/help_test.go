package main

import (
	"strings"
	"testing"
)

func TestHelpOfEveryCommandExplainsItAndNamesItsFlags(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		words []string
	}{
		{[]string{"--help"}, []string{"Vidra is a Kubernetes operator", "kubectl vidra [command]", "clusters", "get", "describe", "enroll"}},
		{[]string{"clusters", "--help"}, []string{"kubectl vidra clusters", "PHASE", "SINCE", "--kubeconfig", "--context", "--output", "wide"}},
		{[]string{"get", "--help"}, []string{"kubectl vidra get", "LAST ERROR", "SYNC", "gs/NAME", "hs/NAME", "--cluster", "--kubeconfig", "--context", "--output", "wide"}},
		{[]string{"describe", "--help"}, []string{"kubectl vidra describe NAME", "Events", "--kubeconfig", "--context"}},
		{[]string{"history", "--help"}, []string{"kubectl vidra history NAME", "ControllerRevisions", "gitsync/NAME", "ocisync/NAME", "helmsync/NAME", "--operator-namespace", "--kubeconfig"}},
		{[]string{"rollback", "--help"}, []string{"kubectl vidra rollback NAME", "--to-revision", "pinned", "--operator-namespace"}},
		{[]string{"diff", "--help"}, []string{"kubectl vidra diff NAME", "server-side dry-run", "exits 0", "hs/NAME", "--kubeconfig"}},
		{[]string{"rollout", "status", "--help"}, []string{"kubectl vidra rollout status SYNC", "gitsync/web", "helmsync/NAME", "--kubeconfig"}},
		{[]string{"rollout", "resume", "--help"}, []string{"kubectl vidra rollout resume SYNC", "healthTimeout", "pinned"}},
		{[]string{"enroll", "--help"}, []string{
			"kubectl vidra enroll NAME", "vidra.infrahub.operators.com/cluster=NAME",
			"--context", "--kubeconfig", "--hub-kubeconfig", "--hub-context", "--labels", "--secret-namespace",
			"--dry-run", "--overwrite", "--allow-exec", "--allow-insecure-tls", "--output",
			"--namespaces", "--cluster-kinds", "--token-ttl", "--service-account", "--copy-credentials",
		}},
		{[]string{"import", "argocd", "--help"}, []string{"kubectl vidra import argocd", "argocd.argoproj.io/secret-type", "execProviderConfig", "--cluster-inventory=argocd", "--argocd-namespace", "--context"}},
		{[]string{"unenroll", "--help"}, []string{"kubectl vidra unenroll NAME", "ServiceAccount first", "--context", "--service-account", "--hub-kubeconfig"}},
		{[]string{"uninstall", "--help"}, []string{"kubectl vidra uninstall", "helm uninstall", "--member-context", "--prune-workloads", "--crds", "--hub-context", "--timeout"}},
		{[]string{"can-deliver", "--help"}, []string{"kubectl vidra can-deliver CLUSTER", "deliver", "vidraclusters", "infrahub.operators.com", "local", "SelfSubjectAccessReview", "SubjectAccessReview", "exits 0", "--as", "--as-group", "--list", "--kubeconfig", "--context"}},
		{[]string{"ui", "--help"}, []string{"kubectl vidra ui", "127.0.0.1", "your RBAC", "--port", "--kubeconfig"}},
		{[]string{"version", "--help"}, []string{"kubectl vidra version", "Deployment", "app.kubernetes.io/name=vidra", "--client", "--namespace", "--kubeconfig"}},
		{[]string{"enroll", "--help"}, []string{"--agent-image", "the image the hub's operator runs"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, _, err := runPlugin(t, tc.args...)
			if err != nil {
				t.Fatalf("%v: %v", tc.args, err)
			}
			for _, w := range tc.words {
				if !strings.Contains(out, w) {
					t.Errorf("help of %v does not mention %q:\n%s", tc.args, w, out)
				}
			}
			if !strings.Contains(out, "Examples:") {
				t.Errorf("help of %v has no examples", tc.args)
			}
		})
	}
}

func TestAWrongFlagPointsAtTheHelp(t *testing.T) {
	_, _, err := runPlugin(t, "get", "--no-such-flag")
	if err == nil || !strings.Contains(err.Error(), "kubectl vidra get --help") {
		t.Fatalf("got %v, want an error pointing at kubectl vidra get --help", err)
	}
}
