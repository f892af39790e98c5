package sharding

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded/sharder"
)

// peerLabel marks the peer Leases of Vidra's replicas.
const peerLabel = "vidra.infrahub.operators.com/shard-peer"

// peerRegistry is the replicas' membership, one Lease per replica, renewed every third of
// its duration. A replica's peer Lease also backs every fence it holds: a fence is not
// renewed on its own, it stays held while its holder's peer Lease lives.
type peerRegistry struct {
	leases client.Client
	ns     string
	self   sharder.PeerInfo
	ttl    time.Duration
	log    logr.Logger
	// changed is signalled (without blocking) when the live peers change.
	changed chan<- struct{}
	// listed is closed once the peers have been listed.
	listed chan struct{}

	mu    sync.RWMutex
	peers []sharder.PeerInfo
	// renewed is when this replica's Lease was last renewed.
	renewed time.Time
	// lapses counts the renewals that completed a whole Lease duration or more after
	// the one before: each time, peers may have counted this replica gone and taken its
	// fences, even if no pass of the decision loop saw it unrenewed.
	lapses int
}

func newPeerRegistry(leases client.Client, ns, id string, ttl time.Duration, changed chan<- struct{}, log logr.Logger) *peerRegistry {
	self := sharder.PeerInfo{ID: id, Weight: 1}
	return &peerRegistry{
		leases: leases, ns: ns, self: self, ttl: ttl, log: log, changed: changed,
		listed: make(chan struct{}), peers: []sharder.PeerInfo{self},
	}
}

// Listed is closed once the live peers have been read once.
func (r *peerRegistry) Listed() <-chan struct{} { return r.listed }

// Live reports whether id is among the live peers as last read.
func (r *peerRegistry) Live(id string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.ContainsFunc(r.peers, func(p sharder.PeerInfo) bool { return p.ID == id })
}

// stopAfter is how long this replica's Lease may go unrenewed before the replica stops
// its clusters: two thirds of its duration, so that it has stopped before its peers count
// it gone and take its fences.
func stopAfter(ttl time.Duration) time.Duration { return ttl * 2 / 3 }

// Renewed reports whether this replica's Lease was renewed within stopAfter, and how
// many lapses there were so far.
func (r *peerRegistry) Renewed(now time.Time) (recently bool, lapses int) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return now.Sub(r.renewed) < stopAfter(r.ttl), r.lapses
}

func (r *peerRegistry) Self() sharder.PeerInfo { return r.self }

func (r *peerRegistry) Snapshot() []sharder.PeerInfo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]sharder.PeerInfo(nil), r.peers...)
}

// Run renews this replica's Lease and reads the others' every third of the Lease's
// duration, until ctx ends.
func (r *peerRegistry) Run(ctx context.Context) error {
	ticker := time.NewTicker(r.ttl / 3)
	defer ticker.Stop()
	for {
		renewedAt := time.Now()
		if err := r.renew(ctx); err != nil && ctx.Err() == nil {
			r.log.Error(err, "renew peer Lease; peers drop this replica if it stays unrenewed")
		} else if err == nil {
			r.mu.Lock()
			if !r.renewed.IsZero() && time.Since(r.renewed) >= r.ttl {
				r.lapses++
			}
			r.renewed = renewedAt
			r.mu.Unlock()
		}
		if err := r.refresh(ctx); err != nil && ctx.Err() == nil {
			r.log.Error(err, "list peer Leases; keeping the last known peers")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
	}
}

func (r *peerRegistry) leaseName() string { return PeerLeasePrefix + "-" + r.self.ID }

// renew creates or renews this replica's Lease.
func (r *peerRegistry) renew(ctx context.Context) error {
	now := metav1.NowMicro()
	lease := &coordinationv1.Lease{}
	err := r.leases.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: r.leaseName()}, lease)
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Namespace: r.ns, Name: r.leaseName(), Labels: map[string]string{peerLabel: "true"},
		}}
		lease.Spec = r.spec(now)
		if err := r.leases.Create(ctx, lease); err != nil {
			return fmt.Errorf("create peer Lease %s: %w", r.leaseName(), err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get peer Lease %s: %w", r.leaseName(), err)
	}
	lease.Spec = r.spec(now)
	if err := r.leases.Update(ctx, lease); err != nil {
		return fmt.Errorf("renew peer Lease %s: %w", r.leaseName(), err)
	}
	return nil
}

func (r *peerRegistry) spec(now metav1.MicroTime) coordinationv1.LeaseSpec {
	return coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To(r.self.ID),
		LeaseDurationSeconds: ptr.To(int32(r.ttl / time.Second)),
		RenewTime:            &now,
	}
}

// refresh reads the live peers: those whose Lease was renewed within its duration.
func (r *peerRegistry) refresh(ctx context.Context) error {
	var list coordinationv1.LeaseList
	if err := r.leases.List(ctx, &list, client.InNamespace(r.ns), client.HasLabels{peerLabel}); err != nil {
		return fmt.Errorf("list peer Leases: %w", err)
	}
	live := []sharder.PeerInfo{r.self}
	now := time.Now()
	for i := range list.Items {
		if lease := &list.Items[i]; heldByPeer(lease, r.self.ID, now) {
			live = append(live, sharder.PeerInfo{ID: *lease.Spec.HolderIdentity, Weight: 1})
		}
	}
	slices.SortFunc(live, func(a, b sharder.PeerInfo) int { return strings.Compare(a.ID, b.ID) })
	r.mu.Lock()
	changed := !slices.Equal(r.peers, live)
	r.peers = live
	r.mu.Unlock()
	select {
	case <-r.listed:
	default:
		close(r.listed)
	}
	if changed {
		r.log.Info("live peers changed", "peers", len(live))
		select {
		case r.changed <- struct{}{}:
		default:
		}
	}
	return nil
}

// heldByPeer reports whether someone other than self holds the Lease and renewed it
// within its duration.
func heldByPeer(lease *coordinationv1.Lease, self string, now time.Time) bool {
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	return holder != "" && holder != self && unexpired(lease, now)
}
