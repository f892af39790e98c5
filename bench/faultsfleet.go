package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// faultsReplicas are the operator's replicas in the faults phase (--sharding).
const faultsReplicas = 3

// faultsLabel selects the faults phase's clusters; faultsRingLabel places them in the
// waves of its progressive sync: the first push cluster is the canary.
const (
	faultsLabel     = "bench.vidra.infrahub.operators.com/faults"
	faultsRingLabel = "ring"
)

// faultsNamespace is where every bundle of the phase lands on each cluster, and all the
// clusters' identities may write.
const faultsNamespace = "bench-faults"

// faultsClusterPrefix begins the push clusters' names.
const faultsClusterPrefix = "soak-"

// faultsCluster is one cluster of the phase: a member control plane, behind a front
// (push) or served by an agent in the bench's process (pull).
type faultsCluster struct {
	name   string
	member *testfleet.Cluster
	// front is the cluster's front; nil for the pull cluster.
	front *cuttableFront
}

// faultsRun is the faults phase's state.
type faultsRun struct {
	*bench
	seed     int64
	clusters []faultsCluster
	pull     *pullAgent
	replicas *replicaSet
	sources  *faultSources
	history  *history
	stops    apiServerStops
	found    *violations
}

func (b *bench) newFaultsRun(ctx context.Context) (*faultsRun, error) {
	seed := b.FaultsSeed
	if seed == 0 {
		var buf [8]byte
		if _, err := rand.Read(buf[:]); err != nil {
			return nil, err
		}
		seed = int64(binary.LittleEndian.Uint64(buf[:]) >> 1)
	}
	h, err := newHistory(filepath.Join(b.dir, "faults-history.log"))
	if err != nil {
		return nil, err
	}
	f := &faultsRun{bench: b, seed: seed, history: h, found: newViolations(h)}
	f.replicas = &replicaSet{f: f}
	return f, ctx.Err()
}

// setUp serves the sources, enrolls the clusters, starts the replicas and the pull agent,
// creates the syncs and waits until every bundle is at its first revision.
func (f *faultsRun) setUp(ctx context.Context, fr *faultsResult) error {
	var err error
	if f.sources, err = newFaultSources(f.Objects, f.log); err != nil {
		return err
	}
	if err := f.sources.createSecrets(ctx, f.fleet.Hub.Client); err != nil {
		return err
	}
	for i, m := range f.members {
		server, err := url.Parse(m.Config.Host)
		if err != nil {
			return err
		}
		front, err := openCuttableFront(ctx, i, server.Host)
		if err != nil {
			return err
		}
		f.clusters = append(f.clusters, faultsCluster{name: fmt.Sprintf("%s%d", faultsClusterPrefix, i), member: m, front: front})
	}
	for _, c := range f.clusters {
		if err := f.enroll(ctx, c, ringOf(c == f.clusters[0])); err != nil {
			return err
		}
	}
	if f.replicas.kubeconfig, err = f.fleet.Hub.WriteKubeconfig(f.dir); err != nil {
		return err
	}
	for i := range faultsReplicas {
		if err := f.replicas.add(i, fmt.Sprintf("soak-%d", i)); err != nil {
			return err
		}
	}
	if err := client.IgnoreAlreadyExists(f.spare.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: faultsNamespace}})); err != nil {
		return err
	}
	if f.pull, err = f.startPullAgent(ctx, f.spare, faultsNamespace, map[string]string{faultsLabel: "true", faultsRingLabel: "main"}); err != nil {
		return err
	}
	f.clusters = append(f.clusters, faultsCluster{name: f.pull.cluster, member: f.spare})
	fr.Clusters, fr.Replicas = len(f.clusters), faultsReplicas
	if err := f.waitEngaged(ctx); err != nil {
		return err
	}
	if err := f.sources.createSyncs(ctx, f.fleet.Hub.Client, f.clusters); err != nil {
		return err
	}
	fr.Bundles = len(f.clusters) * len(sourceKinds)
	start := time.Now()
	if _, err := f.converged(ctx, 5*time.Minute); err != nil {
		return fmt.Errorf("the first revision on every cluster: %w", err)
	}
	fmt.Fprintf(f.log, "  %d bundles at their first revision in %s\n", fr.Bundles, since(start))
	return nil
}

// ringOf is the ring of a push cluster: the canary or the main wave.
func ringOf(canary bool) string {
	if canary {
		return "canary"
	}
	return "main"
}

// enroll creates a push cluster's enrollment Secret: its front's kubeconfig, confined to
// the phase's namespace, which it creates on the member.
func (f *faultsRun) enroll(ctx context.Context, c faultsCluster, ring string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: faultsNamespace}}
	if err := client.IgnoreAlreadyExists(c.member.Client.Create(ctx, ns)); err != nil {
		return err
	}
	kubeconfig, err := frontKubeconfig(c.member.Kubeconfig, c.front.addr())
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: c.name, Namespace: namespace,
			Labels:      map[string]string{vidrav1alpha1.ClusterLabel: c.name, faultsLabel: "true", faultsRingLabel: ring},
			Annotations: map[string]string{vidrav1alpha1.AllowedNamespacesAnnotation: faultsNamespace},
		},
		Data: map[string][]byte{vidrav1alpha1.KubeconfigKey: kubeconfig},
	}
	return f.fleet.Hub.Client.Create(ctx, secret)
}

func (f *faultsRun) waitEngaged(ctx context.Context) error {
	return testfleet.WaitFor(ctx, 200*time.Millisecond, 2*time.Minute, "every faults cluster Engaged", func() (bool, error) {
		for _, c := range f.clusters {
			vc := &vidrav1alpha1.VidraCluster{}
			if err := f.fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: c.name}, vc); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			if vc.Status.Phase != vidrav1alpha1.ClusterEngaged {
				return false, nil
			}
		}
		return true, nil
	})
}

// close stops what the phase started; the hub's and members' objects stay (the phase
// comes last but for the fleet, whose clusters are others).
func (f *faultsRun) close() {
	if err := f.stops.restore(context.Background()); err != nil {
		fmt.Fprintf(f.log, "  %v\n", err)
	}
	f.replicas.stopAll()
	if f.pull != nil {
		f.pull.stop()
		select {
		case <-f.pull.agent.Stopped:
		case <-time.After(30 * time.Second):
		}
		_ = f.pull.log.Close()
	}
	for _, c := range f.clusters {
		if c.front != nil {
			c.front.close()
		}
	}
	if f.sources != nil {
		f.sources.close()
	}
	if err := f.history.close(); err != nil {
		fmt.Fprintf(f.log, "  faults history: %v\n", err)
	}
}

// clear removes the phase's syncs and their VidraResources (the bench's hub runs no
// garbage collector), waits for the replicas to let them go, and unenrolls its
// clusters: a later phase's operator has none of them to manage.
func (f *faultsRun) clear(ctx context.Context) error {
	hub := f.fleet.Hub.Client
	for _, kind := range vidrav1alpha1.SyncKinds() {
		name := faultsSyncName(kind)
		if err := removeSync(ctx, hub, kind, name); err != nil {
			return err
		}
	}
	if f.pull != nil {
		if err := client.IgnoreNotFound(hub.Delete(ctx, f.pull.secret)); err != nil {
			return err
		}
	}
	for _, c := range f.pushClusters() {
		if err := client.IgnoreNotFound(hub.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: c.name}})); err != nil {
			return err
		}
	}
	for _, name := range faultsSecretNames {
		if err := client.IgnoreNotFound(hub.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}})); err != nil {
			return err
		}
	}
	return nil
}
