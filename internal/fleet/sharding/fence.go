package sharding

import (
	"context"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	"sigs.k8s.io/multicluster-runtime/pkg/util/sanitize"
)

// A cluster's fence is a Lease naming the replica that runs the cluster's controllers.
// It is written when a replica takes the cluster and when it hands it back, never to
// renew it: it stays held while its holder's peer Lease lives (or, just after it was
// taken, for its own duration, before every peer has seen the holder's peer Lease). An
// idle fleet's fences thus cost nothing, where a Lease renewed per cluster would cost
// the hub 1,000 clusters ÷ 5s = 200 writes a second. Writes carry the resourceVersion
// read, so two replicas never both take a fence.

// FenceName is the name of a cluster's fence Lease.
func FenceName(cluster multicluster.ClusterName) string {
	return FenceLeasePrefix + "-" + sanitize.DNS1123(string(cluster))
}

// fenceKey is the cluster's fence Lease, in the replicas' namespace.
func (c *Coordinator) fenceKey(name multicluster.ClusterName) client.ObjectKey {
	return client.ObjectKey{Namespace: c.opts.Namespace, Name: FenceName(name)}
}

// fenceHolder is the replica holding the fence, or "" when it is free: no holder, or a
// holder whose peer Lease is gone and whose fence's own duration has passed.
func fenceHolder(lease *coordinationv1.Lease, live func(string) bool, now time.Time) string {
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	if holder == "" {
		return ""
	}
	if live(holder) || unexpired(lease, now) {
		return holder
	}
	return ""
}

func unexpired(lease *coordinationv1.Lease, now time.Time) bool {
	spec := lease.Spec
	if spec.RenewTime == nil || spec.LeaseDurationSeconds == nil {
		return false
	}
	return now.Before(spec.RenewTime.Add(time.Duration(*spec.LeaseDurationSeconds) * time.Second))
}

// listedFences are the namespace's Leases as one List read them, by name. A pass that
// takes or hands back more fences than it has writers reads them so, and then writes
// each with the resourceVersion listed: one request per fence where a read and a write
// were two, when a third of a thousand clusters changes hands at once. A Lease changed
// since the List fails its write with a conflict and is read again; nil: none listed.
type listedFences map[string]*coordinationv1.Lease

// leasesPerRead is how many Leases one List returns in the time of one read: 128 of
// 1,000 Leases on the API server of the tests (a List of them took 19.5ms, a read
// 2.5ms).
const leasesPerRead = 128

// listFences lists the namespace's Leases for a pass that writes n of fleet fences, or
// returns nil when reading each costs less (or the List failed: each is read then).
func (c *Coordinator) listFences(ctx context.Context, n, fleet int) listedFences {
	if n <= fenceWriters || n <= fleet/leasesPerRead {
		return nil
	}
	listed, err := c.listAll(ctx)
	if err != nil {
		c.log.Error(err, "list fence Leases; reading each instead", "fences", n)
		return nil
	}
	return listed
}

// listAll lists the namespace's Leases, by name.
func (c *Coordinator) listAll(ctx context.Context) (listedFences, error) {
	var leases coordinationv1.LeaseList
	if err := c.leases.List(ctx, &leases, client.InNamespace(c.opts.Namespace)); err != nil {
		return nil, fmt.Errorf("list fence Leases: %w", err)
	}
	listed := make(listedFences, len(leases.Items))
	for i := range leases.Items {
		listed[leases.Items[i].Name] = &leases.Items[i]
	}
	return listed, nil
}

// readFence reads the fence Lease into lease: from listed when it was listed (absent
// there, it did not exist), else from the API server.
func (c *Coordinator) readFence(ctx context.Context, key client.ObjectKey, listed listedFences, lease *coordinationv1.Lease) error {
	if listed == nil {
		return c.leases.Get(ctx, key, lease)
	}
	known, ok := listed[key.Name]
	if !ok {
		return apierrors.NewNotFound(coordinationv1.Resource("leases"), key.Name)
	}
	known.DeepCopyInto(lease)
	return nil
}

// takeFence makes this replica the fence's holder. It reports false, without an error,
// when another live replica holds it or another replica wrote it first.
func (c *Coordinator) takeFence(ctx context.Context, name multicluster.ClusterName, listed listedFences) (bool, error) {
	now := metav1.NowMicro()
	spec := coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To(c.self),
		LeaseDurationSeconds: ptr.To(int32(c.opts.LeaseDuration / time.Second)),
		AcquireTime:          &now,
		RenewTime:            &now,
	}
	lease := &coordinationv1.Lease{}
	key := c.fenceKey(name)
	err := c.readFence(ctx, key, listed, lease)
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Spec: spec}
		if err := c.leases.Create(ctx, lease); err != nil {
			if apierrors.IsAlreadyExists(err) {
				if listed != nil {
					return c.takeFence(ctx, name, nil)
				}
				return false, nil
			}
			return false, fmt.Errorf("create fence Lease %s: %w", key.Name, err)
		}
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("get fence Lease %s: %w", key.Name, err)
	}
	if holder := fenceHolder(lease, c.peers.Live, now.Time); holder != "" && holder != c.self {
		return false, nil
	}
	lease.Spec = spec
	if err := c.leases.Update(ctx, lease); err != nil {
		if apierrors.IsConflict(err) {
			if listed != nil {
				return c.takeFence(ctx, name, nil)
			}
			return false, nil
		}
		return false, fmt.Errorf("take fence Lease %s: %w", key.Name, err)
	}
	return true, nil
}

// releaseFence hands the fence back, if this replica still holds it.
func (c *Coordinator) releaseFence(ctx context.Context, name multicluster.ClusterName, listed listedFences) error {
	return c.releaseLease(ctx, c.fenceKey(name), listed)
}

// releaseLease hands the fence Lease key back, if this replica still holds it.
func (c *Coordinator) releaseLease(ctx context.Context, key client.ObjectKey, listed listedFences) error {
	lease := &coordinationv1.Lease{}
	if err := c.readFence(ctx, key, listed, lease); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ptr.Deref(lease.Spec.HolderIdentity, "") != c.self {
		return nil
	}
	lease.Spec.HolderIdentity = ptr.To("")
	if err := c.leases.Update(ctx, lease); err != nil {
		if apierrors.IsConflict(err) && listed != nil {
			return c.releaseLease(ctx, key, nil)
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("release fence Lease %s: %w", key.Name, err)
		}
	}
	return nil
}

// releaseInherited hands back every fence held under this replica's peer ID before its
// first decision. A replica restarted under the same ID (a Pod's container restarted)
// finds those its last process held: knowing none of them, it would neither run their
// clusters nor hand them back, while its live peer Lease kept every peer from taking
// them. It takes again, in its first pass, those still placed here.
func (c *Coordinator) releaseInherited(ctx context.Context) error {
	listed, err := c.listAll(ctx)
	if err != nil {
		return err
	}
	var writers errgroup.Group
	writers.SetLimit(fenceWriters)
	for name, lease := range listed {
		if !strings.HasPrefix(name, FenceLeasePrefix+"-") || ptr.Deref(lease.Spec.HolderIdentity, "") != c.self {
			continue
		}
		writers.Go(func() error {
			return c.releaseLease(ctx, client.ObjectKeyFromObject(lease), listed)
		})
	}
	return writers.Wait()
}

// fenceHeldByPeer reports whether another replica holds the cluster's fence.
func (c *Coordinator) fenceHeldByPeer(ctx context.Context, name multicluster.ClusterName) (bool, error) {
	lease := &coordinationv1.Lease{}
	key := c.fenceKey(name)
	if err := c.leases.Get(ctx, key, lease); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("get fence Lease %s: %w", key.Name, err)
	}
	holder := fenceHolder(lease, c.peers.Live, time.Now())
	return holder != "" && holder != c.self, nil
}

// FenceHolders reads, for a look from outside the replicas (tests, the bench, an
// operator's debugging), the holder of every fence in namespace, by fence Lease name:
// fences that are free are left out.
func FenceHolders(ctx context.Context, c client.Reader, namespace string) (map[string]string, error) {
	var peers coordinationv1.LeaseList
	if err := c.List(ctx, &peers, client.InNamespace(namespace), client.HasLabels{peerLabel}); err != nil {
		return nil, fmt.Errorf("list peer Leases: %w", err)
	}
	now := time.Now()
	live := map[string]bool{}
	for i := range peers.Items {
		if lease := &peers.Items[i]; unexpired(lease, now) {
			live[ptr.Deref(lease.Spec.HolderIdentity, "")] = true
		}
	}
	var leases coordinationv1.LeaseList
	if err := c.List(ctx, &leases, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list fence Leases: %w", err)
	}
	held := map[string]string{}
	for i := range leases.Items {
		lease := &leases.Items[i]
		if !strings.HasPrefix(lease.Name, FenceLeasePrefix+"-") {
			continue
		}
		if holder := fenceHolder(lease, func(id string) bool { return live[id] }, now); holder != "" {
			held[lease.Name] = holder
		}
	}
	return held, nil
}
