package main

import (
	"context"
	"errors"
	"io"
	"net"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// A run's seed replays its schedule: the same faults on the same targets at the same
// times, and the same revisions; every kind comes, even in a short run.
func TestFaultSchedulesReplayFromTheirSeed(t *testing.T) {
	targets := faultTargets{replicas: 3, clusters: 10, fronts: 9, sources: len(faultedKinds)}
	const seed = 1323755430509176540
	plan := planFaults(seed, 10*time.Minute, targets)
	if again := planFaults(seed, 10*time.Minute, targets); !reflect.DeepEqual(plan, again) {
		t.Fatal("the same seed drew another schedule")
	}
	if other := planFaults(seed+1, 10*time.Minute, targets); reflect.DeepEqual(plan, other) {
		t.Fatal("another seed drew the same schedule")
	}
	revisions := planRevisions(seed, 10*time.Minute)
	if again := planRevisions(seed, 10*time.Minute); !reflect.DeepEqual(revisions, again) || len(revisions) < 20 {
		t.Fatalf("revisions: %d drawn, the same seed drawing the same: %v", len(revisions), reflect.DeepEqual(revisions, again))
	}
	if len(plan) < 30 {
		t.Errorf("%d faults in 10 minutes, want a fault every few seconds", len(plan))
	}
	for _, pf := range plan {
		if most := targets.of(pf.Kind); pf.Kind == replicaKill && (pf.Target == witness || pf.Target > most) ||
			pf.Kind != replicaKill && (pf.Target < 0 || pf.Target >= most) {
			t.Errorf("%s: target out of range, or the witness", pf)
		}
		if pf.Kind == operatorKill && pf.At >= 5*time.Minute {
			t.Errorf("%s at %s: an operatorKill in the second half, which the witness must live through", pf, pf.At)
		}
		if lengths := faultLengths[pf.Kind]; pf.For < lengths[0] || pf.For > lengths[1] {
			t.Errorf("%s: lasts outside %v", pf, lengths)
		}
	}
	short := planFaults(seed, time.Minute, targets)
	var kinds []string
	for _, pf := range short {
		kinds = append(kinds, pf.Kind)
	}
	for _, k := range faultKinds {
		if !slices.Contains(kinds, k) {
			t.Errorf("a one-minute run never injects %s: %v", k, kinds)
		}
	}
}

// The checkers see what they guard on a real API server: a delivered object deleted (by
// a watch, across the API server's restart, or missing from a list) or re-created, two
// live VidraResources of one sync, bundle and cluster, each time it happens; an object
// changed, or one sync's VidraResources on two clusters, are no violation.
func TestFaultCheckersSeeWhatTheyGuard(t *testing.T) {
	ctx := t.Context()
	fleet, err := testfleet.Start(ctx, testfleet.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Stop() })
	hub := fleet.Hub
	h, err := newHistory(t.TempDir() + "/history.log")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.close() })
	found := newViolations(h)
	if err := hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: faultsNamespace}}); err != nil {
		t.Fatal(err)
	}
	delivered := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: faultsNamespace,
			Labels: map[string]string{vidrav1alpha1.ManagedByLabel: vidrav1alpha1.ManagedByValue}}}
	}
	for _, name := range []string{"a", "b"} {
		if err := hub.Client.Create(ctx, delivered(name)); err != nil {
			t.Fatal(err)
		}
	}
	w, err := client.NewWithWatch(hub.Config, client.Options{Scheme: hub.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	oc, rc := newObjectChecker("hub", found), newResourceChecker(found)
	watchCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{}, 2)
	go func() {
		listWatch(watchCtx, w, func() client.ObjectList { return &corev1.ConfigMapList{} }, oc.options(), oc.listed, oc.event)
		done <- struct{}{}
	}()
	go func() {
		listWatch(watchCtx, w, func() client.ObjectList { return &vidrav1alpha1.VidraResourceList{} }, nil, rc.listed, rc.event)
		done <- struct{}{}
	}()
	t.Cleanup(func() { stop(); <-done; <-done })
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		testfleet.Eventually(t, 30*time.Second, what, func() (bool, error) { return cond(), nil })
	}
	count := func(checker string) int { return found.snapshot()[checker] }
	waitFor("both objects followed", func() bool { oc.mu.Lock(); defer oc.mu.Unlock(); return len(oc.present) == 2 })

	cm := delivered("a")
	testfleet.Edit(t, hub.Client, cm, func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"changed": "yes"} })
	if err := hub.Client.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	waitFor("the deletion seen", func() bool { return count(deletedWhileOwned) == 1 })
	if err := hub.Client.Create(ctx, delivered("a")); err != nil {
		t.Fatal(err)
	}
	waitFor("the re-creation seen", func() bool { return count(recreated) == 1 })

	if err := hub.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	if err := hub.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	if err := hub.Client.Delete(ctx, delivered("b")); err != nil {
		t.Fatal(err)
	}
	waitFor("a deletion after the API server's restart seen", func() bool { return count(deletedWhileOwned) == 2 })

	// A list after a lost watch that lacks an object followed is a deletion too.
	var now corev1.ConfigMapList
	if err := hub.Client.List(ctx, &now, oc.options()...); err != nil {
		t.Fatal(err)
	}
	if len(now.Items) != 1 {
		t.Fatalf("%d objects listed, want a", len(now.Items))
	}
	oc.listed(nil)
	if n := count(deletedWhileOwned); n != 3 {
		t.Errorf("%d deletions counted, want 3 (two by the watch, one by a list)", n)
	}

	vr := func(name, cluster string) *vidrav1alpha1.VidraResource {
		return &vidrav1alpha1.VidraResource{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{vidrav1alpha1.GitSyncLabel: "soak-git"},
				Annotations: map[string]string{vidrav1alpha1.BundleIDAnnotation: "GitSync"}},
			Spec: vidrav1alpha1.VidraResourceSpec{Destination: vidrav1alpha1.Destination{Cluster: cluster}},
		}
	}
	for _, v := range []*vidrav1alpha1.VidraResource{vr("soak-git-0", "soak-0"), vr("soak-git-1", "soak-1"), vr("soak-git-again", "soak-0")} {
		if err := hub.Client.Create(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	waitFor("two VidraResources of one sync, bundle and cluster seen", func() bool { return count(duplicateVidraResource) == 1 })
	if err := hub.Client.Delete(ctx, vr("soak-git-again", "")); err != nil {
		t.Fatal(err)
	}
	waitFor("the duplicate gone", func() bool { rc.mu.Lock(); defer rc.mu.Unlock(); return len(rc.live) == 2 })
	if err := hub.Client.Create(ctx, vr("soak-git-once-more", "soak-0")); err != nil {
		t.Fatal(err)
	}
	waitFor("a second duplicate seen", func() bool { return count(duplicateVidraResource) == 2 })
	if got := found.snapshot(); got[recreated] != 1 || got[notConverged]+got[credentialInLog] != 0 {
		t.Errorf("violations %v: a change counted, or a checker counted what it does not guard", got)
	}
}

// A cut front closes the connections it carried and holds new ones unanswered; healed,
// it forwards again.
func TestACutFrontHoldsConnectionsUntilHealed(t *testing.T) {
	ctx := t.Context()
	var lc net.ListenConfig
	echo, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = echo.Close() })
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	front, err := openCuttableFront(ctx, 0, echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.close)
	var d net.Dialer
	roundTrip := func(c net.Conn) error {
		_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
		if _, err := c.Write([]byte("x")); err != nil {
			return err
		}
		_, err := io.ReadFull(c, make([]byte, 1))
		return err
	}
	before, err := d.DialContext(ctx, "tcp", front.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = before.Close() }()
	if err := roundTrip(before); err != nil {
		t.Fatalf("before the cut: %v", err)
	}
	front.cut()
	if err := roundTrip(before); err == nil {
		t.Error("a connection open at the cut still answers")
	}
	during, err := d.DialContext(ctx, "tcp", front.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = during.Close() }()
	if err := roundTrip(during); err == nil {
		t.Error("a connection made while cut answers")
	}
	front.heal()
	_ = during.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := during.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("a connection held while cut was not closed at the heal: %v", err)
	}
	after, err := d.DialContext(ctx, "tcp", front.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = after.Close() }()
	if err := roundTrip(after); err != nil {
		t.Errorf("after the heal: %v", err)
	}
}

// A bundle is at a revision when each of its objects says so, and the shared object is
// there for the bundles that hold it.
func TestObjectRevisionsHold(t *testing.T) {
	r := objectRevisions{"git-0": "3", "git-1": "3", faultsSharedName: "", "helm-0": "2", "helm-1": "1"}
	if !r.hold("git", 2, 3) {
		t.Error("git at 3 not seen")
	}
	if r.hold("git", 2, 4) || r.hold("helm", 2, 2) {
		t.Error("a bundle seen at a revision some of its objects lack")
	}
	delete(r, faultsSharedName)
	if r.hold("git", 2, 3) {
		t.Error("a sharing bundle seen whole without its shared object")
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// A bundle that never converged counts as the bound: a run that leaves some behind
// cannot report a small p99.
func TestConvergeFiguresCountWhatNeverConverged(t *testing.T) {
	last := time.Now()
	at := map[bundleOf]time.Time{{"git", "a"}: last.Add(2 * time.Second), {"oci", "a"}: last.Add(-time.Second)}
	p99, most := convergeFigures(last, at, 3, 5*time.Minute)
	if most != 300 || p99 < 2 {
		t.Errorf("p99 %.1f s, most %.1f s: the bundle left behind not counted as the bound", p99, most)
	}
	if p99, most := convergeFigures(last, at, 2, 5*time.Minute); most != 2 || p99 > 2 {
		t.Errorf("p99 %.1f s, most %.1f s, want 2 s at most", p99, most)
	}
}
