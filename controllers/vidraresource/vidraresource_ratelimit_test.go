package vidraresource_test

import (
	"testing"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Every request the operator makes to a cluster passes the cluster's one rate limiter,
// the applies of each reconcile's delivery client included, so --cluster-qps bounds the
// cluster's traffic as a whole. A limit given as QPS and Burst on the cluster's config
// would make client-go give every REST client (one per kind, per reconcile) a bucket of
// its own: the whole went unbounded while a bundle of thousands of objects crawled at the
// one client's rate.
func TestEveryRequestToAClusterPassesItsRateLimiter(t *testing.T) {
	member := fleet.Members[0]
	const objects = 150
	before := limiters.count(member.Name)
	deliver(t, "rate-limited", vidrav1alpha1.Destination{Cluster: member.Name, Namespace: "rate-limited"}, configMaps("limited", objects))
	ready(t, "rate-limited")
	if passed := limiters.count(member.Name) - before; passed < objects {
		t.Fatalf("%d requests passed %s's rate limiter while %d objects were applied there", passed, member.Name, objects)
	}
}
