package sharding

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/engine/apply"
	"github.com/vidra-operator/vidra/internal/fleet/sharding"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

const (
	namespace = testoperator.Namespace
	// release is the chart's release, and so the name of its ServiceAccount.
	release = "vidra"
	// leaseDuration is the replicas' --shard-lease-duration: how long a silent peer, and
	// with it the fences it holds, is honoured.
	leaseDuration = 15 * time.Second
	// takeoverBound is the promise: a killed replica's clusters are taken over within
	// the lease duration plus 15 s.
	takeoverBound = leaseDuration + 15*time.Second
)

// replicas are the operator processes, by shard ID: each runs with the arguments the
// chart gives it and acts as the chart's ServiceAccount, with exactly its rights.
type replicas struct {
	kubeconfig string
	chartArgs  []string
	ops        map[string]*fleetenv.Operator
}

// install installs the chart on the hub for three replicas and keeps what the replicas
// run with: its arguments and a kubeconfig acting as its ServiceAccount.
func (r *replicas) install(ctx context.Context, t *testing.T, hub *testfleet.Cluster) {
	t.Helper()
	chart, err := fleetenv.TheChart()
	if err != nil {
		t.Fatal(err)
	}
	// The test environment installed Vidra's CRDs on the hub: the chart leaves them to it.
	sets := []string{"replicas=3", "rbac.localApply=none", "crds.install=false"}
	objs, err := chart.Render(ctx, release, namespace, sets...)
	if err != nil {
		t.Fatal(err)
	}
	args, err := fleetenv.OperatorArgs(objs)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(args, "--sharding") {
		t.Fatalf("the chart's arguments for 3 replicas do not shard: %q", args)
	}
	// The Pod's ports are the process's own here: three share the host.
	r.chartArgs = slices.DeleteFunc(args, func(a string) bool {
		return strings.HasPrefix(a, "--metrics-bind-address=") || strings.HasPrefix(a, "--health-probe-bind-address=") || strings.HasPrefix(a, "--webhook-bind-address=")
	})
	dir := t.TempDir()
	hubKubeconfig, err := hub.WriteKubeconfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	install := []string{"install", release, chart.Dir(), "--namespace", namespace, "--create-namespace", "--kubeconfig", hubKubeconfig, "--wait=false"}
	for _, s := range sets {
		install = append(install, "--set", s)
	}
	if _, err := chart.Helm(ctx, install...); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := fleetenv.ServiceAccountKubeconfig(hub.Kubeconfig, namespace, release)
	if err != nil {
		t.Fatal(err)
	}
	r.kubeconfig = filepath.Join(dir, "replica.kubeconfig")
	if err := os.WriteFile(r.kubeconfig, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (r *replicas) start(ctx context.Context, t *testing.T, id string) {
	t.Helper()
	// The volume the chart mounts for sources is not here: a temporary directory is.
	op, err := fleetenv.StartOperator(ctx, append(slices.Clone(r.chartArgs), "--kubeconfig="+r.kubeconfig, "--source-cache-dir=",
		"--shard-id="+id, "--shard-lease-duration="+leaseDuration.String(), "--hub-id=shard", "--webhook-bind-address=0", "--cluster-probe-interval=2s")...)
	if err != nil {
		t.Fatal(err)
	}
	r.ops[id] = op
}

// ids are the running replicas' shard IDs, sorted.
func (r *replicas) ids() []string {
	return slices.Sorted(maps.Keys(r.ops))
}

// stopAll stops every replica, checks that the chart's rights refused none of their
// requests, and shows their logs when the test failed.
func (r *replicas) stopAll(t *testing.T) {
	for _, id := range r.ids() {
		op := r.ops[id]
		if err := op.Stop(30 * time.Second); err != nil {
			t.Logf("stop %s: %v", id, err)
		}
		notRefused(t, id, op)
		if t.Failed() {
			t.Logf("logs of %s:\n%s", id, op.Logs())
		}
	}
}

// notRefused checks that the chart's rights refused the replica no request.
func notRefused(t *testing.T, id string, op *fleetenv.Operator) {
	t.Helper()
	for _, line := range strings.Split(string(op.Logs()), "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			t.Errorf("%s was refused a request with the chart's rights: %s", id, line)
		}
	}
}

// expectedOwners is where rendezvous hashing places each member among the peers.
func expectedOwners(members []string, peers []string) map[string]string {
	owners := map[string]string{}
	for _, m := range members {
		owners[m] = sharding.OwnerAmong(m, peers)
	}
	return owners
}

// fenceHolders are the live holders of the members' fence Leases.
func fenceHolders(ctx context.Context, c client.Client, members []string) (map[string]string, error) {
	held, err := sharding.FenceHolders(ctx, c, namespace)
	if err != nil {
		return nil, err
	}
	holders := map[string]string{}
	for _, m := range members {
		if holder, ok := held[sharding.FenceName(multicluster.ClusterName(m))]; ok {
			holders[m] = holder
		}
	}
	return holders, nil
}

// waitForOwners waits until every member's fence is held by the replica rendezvous
// hashing picks among peers, and returns how long that took.
func waitForOwners(ctx context.Context, t *testing.T, c client.Client, members, peers []string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	want := expectedOwners(members, peers)
	testfleet.Poll(t, 250*time.Millisecond, timeout, fmt.Sprintf("fences held as %v", want), func() (bool, error) {
		got, err := fenceHolders(ctx, c, members)
		if err != nil {
			return false, err
		}
		return maps.Equal(got, want), fmt.Errorf("holders %v", got)
	})
	return time.Since(start)
}

// resource delivers ConfigMap "config" with data version=v to a member.
func resource(member string, version int) *vidrav1alpha1.VidraResource {
	return &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "shard-" + member},
		Spec: vidrav1alpha1.VidraResourceSpec{
			Destination: vidrav1alpha1.Destination{Cluster: member, Namespace: "sharded", ReconcileOnEvents: true},
			Manifest:    fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: config\ndata:\n  version: %q\n", strconv.Itoa(version)),
		},
	}
}

// deliver writes every member's VidraResource at version v and waits until every member
// has the ConfigMap at v and every VidraResource is Ready for its generation.
func deliver(ctx context.Context, t *testing.T, fleet *testfleet.Fleet, version int) {
	t.Helper()
	// The chart's MutatingAdmissionPolicy refuses VidraResources for a few seconds after
	// it is installed: a person at kubectl would try again, and so does this.
	hub := testfleet.Retrying(fleet.Hub.Client)
	for _, m := range fleet.Members {
		want := resource(m.Name, version)
		vr := &vidrav1alpha1.VidraResource{}
		err := fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(want), vr)
		switch {
		case apierrors.IsNotFound(err):
			err = hub.Create(ctx, want)
		case err == nil:
			before := vr.DeepCopy()
			vr.Spec.Manifest = want.Spec.Manifest
			err = hub.Patch(ctx, vr, client.MergeFrom(before))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	testfleet.Eventually(t, 60*time.Second, fmt.Sprintf("version %d on every member", version), func() (bool, error) {
		for _, m := range fleet.Members {
			cm := &corev1.ConfigMap{}
			if err := m.Client.Get(ctx, client.ObjectKey{Namespace: "sharded", Name: "config"}, cm); err != nil {
				return false, fmt.Errorf("%s: %w", m.Name, err)
			}
			if cm.Data["version"] != strconv.Itoa(version) {
				return false, fmt.Errorf("%s has version %s", m.Name, cm.Data["version"])
			}
			vr := &vidrav1alpha1.VidraResource{}
			if err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: "shard-" + m.Name}, vr); err != nil {
				return false, err
			}
			if vr.Status.ObservedGeneration != vr.Generation || !meta.IsStatusConditionTrue(vr.Status.Conditions, vidrav1alpha1.ConditionReady) {
				return false, fmt.Errorf("%s not Ready at generation %d", vr.Name, vr.Generation)
			}
		}
		return true, nil
	})
}

// applies reads a replica's vidra_apply_total, summed per destination cluster.
func applies(ctx context.Context, t *testing.T, op *fleetenv.Operator) map[string]float64 {
	t.Helper()
	return sumBy(ctx, t, op, "vidra_apply_total", "cluster")
}

// reconciles reads how many reconciles a replica's controller ran.
func reconciles(ctx context.Context, t *testing.T, op *fleetenv.Operator, controller string) float64 {
	t.Helper()
	return sumBy(ctx, t, op, "controller_runtime_reconcile_total", "controller")[controller]
}

// sumBy sums a replica's metric over every label but one.
func sumBy(ctx context.Context, t *testing.T, op *fleetenv.Operator, metric, label string) map[string]float64 {
	t.Helper()
	code, body, err := fleetenv.Get(ctx, op.MetricsURL+"/metrics")
	if err != nil || code != 200 {
		t.Fatalf("metrics: %d %v", code, err)
	}
	sums := map[string]float64{}
	scanner := bufio.NewScanner(strings.NewReader(body))
	for scanner.Scan() {
		line := scanner.Text()
		labels, ok := strings.CutPrefix(line, metric+"{")
		if !ok {
			continue
		}
		labels, value, _ := strings.Cut(labels, "} ")
		_, key, _ := strings.Cut(labels, label+`="`)
		key, _, _ = strings.Cut(key, `"`)
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sums[key] += v
	}
	return sums
}

// deliverAndCheckAppliers delivers a new version and checks that each member's objects
// were applied by its owner alone.
func deliverAndCheckAppliers(ctx context.Context, t *testing.T, fleet *testfleet.Fleet, r *replicas, version int) {
	t.Helper()
	before := map[string]map[string]float64{}
	for id, op := range r.ops {
		before[id] = applies(ctx, t, op)
	}
	deliver(ctx, t, fleet, version)
	var members []string
	for _, m := range fleet.Members {
		members = append(members, m.Name)
	}
	owners := expectedOwners(members, r.ids())
	for _, m := range members {
		var appliers []string
		for id, op := range r.ops {
			if applies(ctx, t, op)[m] > before[id][m] {
				appliers = append(appliers, id)
			}
		}
		if !slices.Equal(appliers, []string{owners[m]}) {
			t.Errorf("version %d of %s was applied by %v, want %s alone", version, m, appliers, owners[m])
		}
	}
}

// checkOneWriter checks that every member's ConfigMap has one applier, its VidraResource.
func checkOneWriter(ctx context.Context, t *testing.T, fleet *testfleet.Fleet) {
	t.Helper()
	for _, m := range fleet.Members {
		cm := &corev1.ConfigMap{}
		if err := m.Client.Get(ctx, client.ObjectKey{Namespace: "sharded", Name: "config"}, cm); err != nil {
			t.Fatal(err)
		}
		var appliers []string
		for _, e := range cm.ManagedFields {
			if e.Operation == metav1.ManagedFieldsOperationApply {
				appliers = append(appliers, e.Manager)
			}
		}
		if len(appliers) != 1 || !strings.HasPrefix(appliers[0], apply.FieldManagerPrefix) {
			t.Errorf("%s: ConfigMap appliers %v, want one Vidra field manager", m.Name, appliers)
		}
	}
}

func TestReplicasSplitTheFleetAndTakeOverAKilledOnesClusters(t *testing.T) {
	if _, err := fleetenv.TheChart(); errors.Is(err, fleetenv.ErrNoHelm) {
		t.Skip(err)
	}
	r := &replicas{ops: map[string]*fleetenv.Operator{}}
	var members []string
	var victim string

	feature := features.New("three replicas split six members").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			fleet := fleetenv.Fleet(ctx)
			for _, m := range fleet.Members {
				members = append(members, m.Name)
			}
			if err := testoperator.CreateEnrollments(ctx, fleet.Hub, fleet.Members...); err != nil {
				t.Fatal(err)
			}
			r.install(ctx, t, fleet.Hub)
			for _, id := range []string{"replica-1", "replica-2", "replica-3"} {
				r.start(ctx, t, id)
			}
			return ctx
		}).
		Assess("each member is reconciled by exactly one replica", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			fleet := fleetenv.Fleet(ctx)
			took := waitForOwners(ctx, t, fleet.Hub.Client, members, r.ids(), 90*time.Second)
			t.Logf("fences settled %v after start: %v", took.Round(time.Second), expectedOwners(members, r.ids()))
			deliver(ctx, t, fleet, 1)
			deliverAndCheckAppliers(ctx, t, fleet, r, 2)
			checkOneWriter(ctx, t, fleet)
			testfleet.Eventually(t, 30*time.Second, "every VidraCluster Engaged", func() (bool, error) {
				var list vidrav1alpha1.VidraClusterList
				if err := fleet.Hub.Client.List(ctx, &list); err != nil {
					return false, err
				}
				engaged := 0
				for _, vc := range list.Items {
					if vc.Status.Phase == vidrav1alpha1.ClusterEngaged {
						engaged++
					}
				}
				return engaged == len(members), fmt.Errorf("%d of %d Engaged", engaged, len(members))
			})
			return ctx
		}).
		Assess("an InfrahubSync is synced by one replica, the leader", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			fleet := fleetenv.Fleet(ctx)
			sync := &vidrav1alpha1.InfrahubSync{
				ObjectMeta: metav1.ObjectMeta{Name: "shard-sync", Namespace: namespace},
				Spec: vidrav1alpha1.InfrahubSyncSpec{
					Source: vidrav1alpha1.InfrahubSyncSource{
						InfrahubAPIURL: "http://127.0.0.1:9", InsecureAllowHTTP: true, ArtefactName: "nowhere",
					},
					Interval: &metav1.Duration{Duration: time.Hour},
				},
			}
			if err := fleet.Hub.Client.Create(ctx, sync); err != nil {
				t.Fatal(err)
			}
			testfleet.Eventually(t, 30*time.Second, "the sync reports its unreachable source", func() (bool, error) {
				err := fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(sync), sync)
				return err == nil && sync.Status.LastError != "", err
			})
			var syncers []string
			for _, id := range r.ids() {
				if reconciles(ctx, t, r.ops[id], "infrahubsync") > 0 {
					syncers = append(syncers, id)
				}
			}
			if len(syncers) != 1 {
				t.Errorf("replicas that reconciled the InfrahubSync: %v, want one", syncers)
			}
			return ctx
		}).
		Assess("a killed replica's members are taken over within the lease duration plus 15s", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			fleet := fleetenv.Fleet(ctx)
			owners := expectedOwners(members, r.ids())
			for _, id := range r.ids() {
				if victim == "" || countOf(owners, id) > countOf(owners, victim) {
					victim = id
				}
			}
			r.ops[victim].Kill()
			killed := time.Now()
			<-r.ops[victim].Exited()
			notRefused(t, victim, r.ops[victim])
			delete(r.ops, victim)

			waitForOwners(ctx, t, fleet.Hub.Client, members, r.ids(), 2*takeoverBound)
			took := time.Since(killed)
			t.Logf("the %d members of %s were taken over %v after SIGKILL (bound %v)", countOf(owners, victim), victim, took.Round(time.Second), takeoverBound)
			if took > takeoverBound {
				t.Errorf("takeover took %v, more than %v", took, takeoverBound)
			}
			deliverAndCheckAppliers(ctx, t, fleet, r, 3)
			checkOneWriter(ctx, t, fleet)
			return ctx
		}).
		Assess("the restarted replica gets its members back", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			fleet := fleetenv.Fleet(ctx)
			r.start(ctx, t, victim)
			took := waitForOwners(ctx, t, fleet.Hub.Client, members, r.ids(), 60*time.Second)
			t.Logf("rebalanced %v after %s restarted", took.Round(time.Second), victim)
			deliverAndCheckAppliers(ctx, t, fleet, r, 4)
			checkOneWriter(ctx, t, fleet)
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			r.stopAll(t)
			return ctx
		}).
		Feature()
	testenv.Test(t, feature)
}

func countOf(owners map[string]string, id string) int {
	n := 0
	for _, o := range owners {
		if o == id {
			n++
		}
	}
	return n
}
