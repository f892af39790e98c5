package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// deliverer is a user of the hub bound to a ClusterRole that lets it deliver to one
// cluster only (and list the clusters); the test returns its kubeconfig's path.
func deliverer(t *testing.T, user, cluster string) string {
	t.Helper()
	kubeconfig, err := fleet.Hub.AddUser(user)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	rbac := `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: deliver-` + cluster + `}
rules:
- apiGroups: [infrahub.operators.com]
  resources: [vidraclusters]
  resourceNames: [` + cluster + `]
  verbs: [deliver]
- apiGroups: [infrahub.operators.com]
  resources: [vidraclusters]
  verbs: [list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ` + user + `-deliver-` + cluster + `}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: deliver-` + cluster + `}
subjects: [{kind: User, name: ` + user + `, apiGroup: rbac.authorization.k8s.io}]
`
	if _, err := fleet.Hub.Kubectl(context.Background(), []byte(rbac), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = fleet.Hub.Kubectl(context.Background(), []byte(rbac), "delete", "--ignore-not-found", "-f", "-")
	})
	return path
}

// canDeliver runs can-deliver and returns what it printed and its exit code.
func canDeliver(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, stderr, err := runPlugin(t, append([]string{"can-deliver"}, args...)...)
	var exit exitError
	switch {
	case err == nil:
		return out, 0
	case errors.As(err, &exit):
		return out, exit.code
	}
	t.Fatalf("can-deliver %v: %v\n%s", args, err, stderr)
	return "", 0
}

// A user allowed to deliver to one cluster gets yes there, with the binding that allows
// it, and no (exit code 1) elsewhere and on the hub itself; cluster-admin gets yes
// everywhere. --list says the same of every cluster, with the role that allows.
func TestCanDeliverSaysYesWhereRBACAllowsAndNoElsewhere(t *testing.T) {
	createCluster(t, "deliver-a", vidrav1alpha1.VidraClusterStatus{Phase: vidrav1alpha1.ClusterEngaged})
	createCluster(t, "deliver-b", vidrav1alpha1.VidraClusterStatus{Phase: vidrav1alpha1.ClusterEngaged})
	alice := deliverer(t, "alice", "deliver-a")
	admin := hubKubeconfig(t)

	out, code := canDeliver(t, "deliver-a", "--kubeconfig", alice)
	if code != 0 || !strings.HasPrefix(out, "yes - ") || !strings.Contains(out, `ClusterRole "deliver-deliver-a"`) {
		t.Errorf("alice on deliver-a: exit %d, %q; want yes and the ClusterRole that allows it", code, out)
	}
	for _, cluster := range []string{"deliver-b", vidrav1alpha1.LocalClusterName} {
		out, code := canDeliver(t, cluster, "--kubeconfig", alice)
		if code != 1 || !strings.HasPrefix(out, "no - ") || !strings.Contains(out, "the verb deliver on vidraclusters.infrahub.operators.com named "+cluster) {
			t.Errorf("alice on %s: exit %d, %q; want no and the right that is missing", cluster, code, out)
		}
	}
	for _, cluster := range []string{"deliver-a", "deliver-b", vidrav1alpha1.LocalClusterName} {
		if out, code := canDeliver(t, cluster, "--kubeconfig", admin); code != 0 || !strings.HasPrefix(out, "yes") {
			t.Errorf("cluster-admin on %s: exit %d, %q; want yes", cluster, code, out)
		}
	}

	out, code = canDeliver(t, "--list", "--kubeconfig", alice)
	if code != 0 {
		t.Fatalf("--list: exit %d\n%s", code, out)
	}
	tb := parseTable(t, out, "NAME", "DELIVER", "ROLE", "REASON")
	tb.expectRow(t, "deliver-a", map[string]string{"DELIVER": "yes", "ROLE": "ClusterRole/deliver-deliver-a"})
	tb.expectRow(t, "deliver-b", map[string]string{"DELIVER": "no", "ROLE": "-"})
	tb.expectRow(t, vidrav1alpha1.LocalClusterName, map[string]string{"DELIVER": "no", "ROLE": "-"})
	out, _ = canDeliver(t, "--list", "--kubeconfig", admin)
	tb = parseTable(t, out, "NAME", "DELIVER", "ROLE", "REASON")
	for _, cluster := range []string{"deliver-a", "deliver-b", vidrav1alpha1.LocalClusterName} {
		tb.expectRow(t, cluster, map[string]string{"DELIVER": "yes"})
	}
}

// --as asks about another user with a SubjectAccessReview: cluster-admin may ask it, and
// gets that user's answers; a user who may not create SubjectAccessReviews is told so.
func TestCanDeliverAsAnotherUserNeedsTheRightToReview(t *testing.T) {
	createCluster(t, "review-a", vidrav1alpha1.VidraClusterStatus{Phase: vidrav1alpha1.ClusterEngaged})
	bob := deliverer(t, "bob", "review-a")
	admin := hubKubeconfig(t)

	if out, code := canDeliver(t, "review-a", "--as", "bob", "--kubeconfig", admin); code != 0 || !strings.Contains(out, `to User "bob"`) {
		t.Errorf("bob on review-a, asked by cluster-admin: exit %d, %q; want yes", code, out)
	}
	if out, code := canDeliver(t, "review-b", "--as", "bob", "--as-group", "team-web", "--kubeconfig", admin); code != 1 || !strings.Contains(out, "user bob in groups team-web") {
		t.Errorf("bob on review-b, asked by cluster-admin: exit %d, %q; want no, about user bob in groups team-web", code, out)
	}
	_, stderr, err := runPlugin(t, "can-deliver", "review-a", "--as", "carol", "--kubeconfig", bob)
	if err == nil || !strings.Contains(err.Error(), "subjectaccessreviews.authorization.k8s.io") {
		t.Errorf("--as by a user who may not review others: %v\n%s; want an error naming the right it takes", err, stderr)
	}
}
