package sourcesync_test

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/helmrepo"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// jobsOf lists the names of the Jobs in ns on c whose name starts with prefix.
func jobsOf(t *testing.T, c *testfleet.Cluster, ns, prefix string) []string {
	t.Helper()
	var list batchv1.JobList
	if err := c.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, j := range list.Items {
		if strings.HasPrefix(j.Name, prefix) {
			out = append(out, j.Name)
		}
	}
	return out
}

// A chart's hooks map onto Vidra's delivery: its test Pod and pre-delete hook are never
// delivered; its pre-install hooks are, in the stage before the chart's other objects;
// its hook Job is named after its content, so a new version replaces it. Then each bad
// input is reported on the sync, one at a time, and what was delivered stays: a version
// that does not exist, wrong credentials (never shown), an unreachable repository.
func TestHelmChartHooksAndBadInput(t *testing.T) {
	const ns = "hs-hooks"
	member := fleet.Members[1]
	const user, password = "helm", "s3cret-pa55"
	repo := helmrepo.NewRepo(t, helmrepo.WithBasicAuth(user, password))
	repo.Add(helmrepo.Chart(t, helmrepo.HooksChart, "1.0.0"))
	createSecret(t, "helm-creds", map[string][]byte{"username": []byte(user), "password": []byte(password)}, repo.URL())
	hs := helmSync("hooks", repo.URL(), helmrepo.HooksChart, func(hs *vidrav1alpha1.HelmSync) {
		hs.Spec.Source.SecretRef = &vidrav1alpha1.LocalSecretReference{Name: "helm-creds"}
		hs.Spec.Destination = toCluster(member.Name, ns)
		// Short: the repository's index is asked at most every few seconds, however
		// often a sync is requested.
		hs.Spec.Interval = &metav1.Duration{Duration: 3 * time.Second}
		// No member runs its Job or Deployment: what is tested is what is delivered.
		hs.Spec.Wait = ptr.To(false)
	})
	create(t, hs)
	readyAt(t, hs, "1.0.0")
	waitData(t, member, ns, "hooks-config", "image", "busybox:1.36")
	waitData(t, member, ns, "hooks-post", "phase", "post")
	pre := &corev1.ConfigMap{}
	if err := member.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "hooks-pre"}, pre); err != nil {
		t.Fatalf("the pre-install hook was not delivered: %v", err)
	}
	if phase := pre.Annotations[vidrav1alpha1.ApplyPhaseAnnotation]; phase != vidrav1alpha1.ApplyPhasePre {
		t.Errorf("the pre-install hook has apply phase %q, want %q", phase, vidrav1alpha1.ApplyPhasePre)
	}
	for _, absent := range []client.Object{
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hooks-test"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hooks-cleanup"}},
	} {
		if err := member.Client.Get(context.Background(), client.ObjectKeyFromObject(absent), absent); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s was delivered (err %v): test and delete hooks never are", absent, absent.GetName(), err)
		}
	}
	jobs := jobsOf(t, member, ns, "hooks-migrate-")
	if len(jobs) != 1 {
		t.Fatalf("hook Jobs %v, want one named after its content", jobs)
	}

	// A new version whose hook Job differs: a new Job, the old one pruned.
	repo.Add(helmrepo.ChartWith(t, helmrepo.HooksChart, "1.1.0", map[string]string{"values.yaml": "image: busybox:1.37\nreplicas: 1\n"}))
	requestSync(t, hs)
	readyAt(t, hs, "1.1.0")
	waitData(t, member, ns, "hooks-config", "image", "busybox:1.37")
	testfleet.Eventually(t, 60*time.Second, "the old hook Job pruned and a new one made", func() (bool, error) {
		now := jobsOf(t, member, ns, "hooks-migrate-")
		return len(now) == 1 && now[0] != jobs[0], nil
	})

	kept := func(cause string) {
		t.Helper()
		if got := dataOf(t, member, ns, "hooks-config", "image"); got != "busybox:1.37" {
			t.Errorf("after %s the delivered ConfigMap has %q, want it kept", cause, got)
		}
	}
	update(t, hs, func() { hs.Spec.Source.Version = "9.9.9" })
	condition(t, hs, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonRefNotFound)
	if msg := readyMessage(hs); !containsAll(msg, "9.9.9", "1.1.0") {
		t.Errorf("Ready says %q, want the missing version and the versions there are", msg)
	}
	waitEvent(t, hs, vidrav1alpha1.ReasonRefNotFound, "9.9.9")
	kept("a missing version")

	wrong := "wrong-" + password
	createSecret(t, "helm-wrong", map[string][]byte{"username": []byte(user), "password": []byte(wrong)}, repo.URL())
	update(t, hs, func() {
		hs.Spec.Source.Version = ""
		hs.Spec.Source.SecretRef.Name = "helm-wrong"
	})
	condition(t, hs, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonAuthenticationFailed)
	waitEvent(t, hs, vidrav1alpha1.ReasonAuthenticationFailed)
	if msg := readyMessage(hs); strings.Contains(msg, wrong) || strings.Contains(msg, password) {
		t.Errorf("Ready shows a password: %q", msg)
	}
	kept("wrong credentials")

	update(t, hs, func() { hs.Spec.Source.SecretRef.Name = "helm-creds" })
	readyAt(t, hs, "1.1.0")
	repo.Close()
	requestSync(t, hs)
	condition(t, hs, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonFetchFailed)
	kept("the repository going away")
}
