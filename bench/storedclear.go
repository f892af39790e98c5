package main

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// The bench removes a measured fleet straight from its control planes' etcds, under the
// API servers, rather than through them: through the API a VidraResource costs two
// writes (its finalizer removed, then its deletion), each validated, converted and
// recorded in managed fields, and a thousand clusters' clear took 3 min 46 s of the
// phase's 17 (CPU-bound, on two cores), though none of it is measured. The API servers
// see each removal as a deletion on their watch of etcd, as they would any other, so
// their caches and the next operator's lists hold none of it.

// registryPrefix is where a kube-apiserver stores its objects in etcd (--etcd-prefix's
// default): a built-in kind under its resource, a custom one under its group and
// resource.
const registryPrefix = "/registry/"

// storedPerDelete is how many keys one deletion removes: each deletion's watch events,
// the removed objects with them, reach every API server watching as one message.
const storedPerDelete = 100

// storedStore is one control plane's etcd, opened for the clear.
type storedStore struct {
	client *clientv3.Client
}

func openStored(ctx context.Context, etcdURL string) (*storedStore, error) {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdURL}, DialTimeout: 10 * time.Second, Context: ctx})
	if err != nil {
		return nil, fmt.Errorf("connect to etcd %s: %w", etcdURL, err)
	}
	return &storedStore{client: c}, nil
}

func (s *storedStore) close() { _ = s.client.Close() }

// deletePrefix removes every object stored under registryPrefix+prefix, storedPerDelete
// at a time, and returns how many it removed. Nothing else writes there meanwhile (the
// operator is stopped), so each range of keys listed holds exactly those keys.
func (s *storedStore) deletePrefix(ctx context.Context, prefix string) (int, error) {
	full := registryPrefix + prefix
	listed, err := s.client.Get(ctx, full, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", full, err)
	}
	removed := 0
	for from := 0; from < len(listed.Kvs); from += storedPerDelete {
		until := min(from+storedPerDelete, len(listed.Kvs))
		first, last := string(listed.Kvs[from].Key), string(listed.Kvs[until-1].Key)
		deleted, err := s.client.Delete(ctx, first, clientv3.WithRange(last+"\x00"))
		if err != nil {
			return removed, fmt.Errorf("delete %s: %w", full, err)
		}
		removed += int(deleted.Deleted)
	}
	return removed, nil
}

// clear removes the fleet just measured with the operator stopped, so that the next size
// starts from nothing: on the hub the syncs, every VidraResource and revision, the
// enrollment Secrets and VidraClusters, and at the same time the delivered objects on
// the members (at a thousand clusters, 30,000 objects on the hub and 100,000 on the
// members).
func (f *fleetRun) clear(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	start := time.Now()
	g.Go(func() error {
		defer func() { fmt.Fprintf(f.log, "    the hub's part cleared in %s\n", since(start)) }()
		return f.clearHub(ctx)
	})
	g.Go(func() error {
		defer func() { fmt.Fprintf(f.log, "    the members' part cleared in %s\n", since(start)) }()
		return f.clearMembers(ctx)
	})
	return g.Wait()
}

// clearHub removes the fleet's objects from the hub's etcd, kind by kind, and checks
// that the hub's API server lists no VidraResource any more.
func (f *fleetRun) clearHub(ctx context.Context) error {
	hub, err := openStored(ctx, f.fleet.Hub.EtcdURL())
	if err != nil {
		return err
	}
	defer hub.close()
	group := vidrav1alpha1.GroupVersion.Group
	kinds := []struct{ what, prefix string }{
		{"InfrahubSyncs", group + "/infrahubsyncs/" + fleetArtifactPrefix},
		{"VidraResources", group + "/vidraresources/"},
		{"revisions", "controllerrevisions/" + namespace + "/"},
		{"enrollment Secrets", "secrets/" + namespace + "/" + fleetClusterPrefix},
		{"VidraClusters", group + "/vidraclusters/" + fleetClusterPrefix},
	}
	for _, k := range kinds {
		removed, err := hub.deletePrefix(ctx, k.prefix)
		if err != nil {
			return fmt.Errorf("clear the hub's %s: %w", k.what, err)
		}
		fmt.Fprintf(f.log, "    %d %s removed\n", removed, k.what)
	}
	return f.awaitNoVidraResources(ctx)
}

// awaitNoVidraResources returns once the hub's API server lists no VidraResource: its
// cache follows etcd's deletions, and the next operator's first list must find none.
func (f *fleetRun) awaitNoVidraResources(ctx context.Context) error {
	return testfleet.WaitFor(ctx, 100*time.Millisecond, time.Minute, "the hub lists no VidraResource once they were removed from etcd", func() (bool, error) {
		var vrs vidrav1alpha1.VidraResourceList
		if err := f.fleet.Hub.Client.List(ctx, &vrs, client.Limit(1)); err != nil {
			return false, err
		}
		return len(vrs.Items) == 0, nil
	})
}

// clearMembers removes the delivered objects from the members' etcds, each cluster's
// namespace at a time.
func (f *fleetRun) clearMembers(ctx context.Context) error {
	stores := map[*testfleet.Cluster]*storedStore{}
	defer func() {
		for _, s := range stores {
			s.close()
		}
	}()
	for _, m := range f.members {
		s, err := openStored(ctx, m.EtcdURL())
		if err != nil {
			return err
		}
		stores[m] = s
	}
	return forEach(ctx, f.clusters, func(c fleetCluster) error {
		_, err := stores[c.member].deletePrefix(ctx, "configmaps/"+c.name+"/")
		return err
	})
}
