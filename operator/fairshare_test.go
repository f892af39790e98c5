package operator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/slowadmission"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
	"github.com/vidra-operator/vidra/operator"
)

// The workers every team shares, with a realistic request timeout (30 s): 4 of each, at
// most 2 for one cluster or one Infrahub.
const (
	sharedWorkers = 4
	workersShare  = 2
)

// One team's slow member or trickling Infrahub holds no more than its share of the
// workers: another team's bundle and sync are delivered meanwhile. Before, the slow
// team's work took every worker, for as long as a request may take, and the other team's
// waited until some of it was through.
func TestOneSlowClusterOrSourceLeavesWorkersToTheOthers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	fleet, err := testfleet.Start(ctx, testfleet.Options{Members: 2})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	op, err := testoperator.Start(ctx, fleet, testoperator.Options{Configure: func(o *operator.Options) {
		o.RequestTimeout, o.InfrahubTimeout = 30*time.Second, 30*time.Second
		o.MaxConcurrentReconciles, o.MaxConcurrentSyncs = sharedWorkers, sharedWorkers
		o.MaxConcurrentReconcilesPerCluster, o.MaxConcurrentSyncsPerSource = workersShare, workersShare
	}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		<-op.Stopped
		if err := fleet.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err := testoperator.Enroll(ctx, fleet.Hub, fleet.Members...); err != nil {
		t.Fatal(err)
	}
	t.Run("a member whose admission webhook holds every write", func(t *testing.T) { slowMember(t, fleet) })
	t.Run("an Infrahub that trickles its artifacts", func(t *testing.T) { tricklingInfrahub(t, fleet) })
	t.Run("one tenant's syncs at two trickling Infrahubs", func(t *testing.T) { tricklingInfrahubsOfOneTenant(t, fleet) })
}

func slowMember(t *testing.T, fleet *testfleet.Fleet) {
	ctx := context.Background()
	slow, other := fleet.Members[1], fleet.Members[0]
	hook, err := slowadmission.Start(ctx, slow.Client, "slow-admission", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := hook.Stop(ctx, slow.Client); err != nil {
			t.Error(err)
		}
	})
	hook.SetSlow(true)
	var waiting []client.Object
	for i := range sharedWorkers {
		vr := bundle(fmt.Sprintf("slow-%d", i), vidrav1alpha1.Destination{Cluster: slow.Name, Namespace: "slow-admission"}, configMap(fmt.Sprintf("slow-%d", i), "v"))
		if err := fleet.Hub.Client.Create(ctx, vr); err != nil {
			t.Fatal(err)
		}
		cleanup(t, fleet.Hub.Client, vr)
		waiting = append(waiting, vr)
	}
	testfleet.Eventually(t, objectsTimeout, "the slow member's bundles waiting in its webhook", func() (bool, error) {
		return hook.InFlight() >= workersShare, nil
	})

	beside := bundle("beside-slow", vidrav1alpha1.Destination{Cluster: other.Name, Namespace: "team-a"}, configMap("beside-slow", "v"))
	if err := fleet.Hub.Client.Create(ctx, beside); err != nil {
		t.Fatal(err)
	}
	cleanup(t, fleet.Hub.Client, beside)
	readyBeforeAny(t, fleet, beside, waiting, vidrav1alpha1.ReasonSucceeded)
	// Once the webhook answers, the slow member's bundles are delivered too.
	if err := hook.Stop(ctx, slow.Client); err != nil {
		t.Fatal(err)
	}
	for _, vr := range waiting {
		readyBeforeAny(t, fleet, vr, nil, vidrav1alpha1.ReasonSucceeded)
	}
}

func tricklingInfrahub(t *testing.T, fleet *testfleet.Fleet) {
	ctx := context.Background()
	dest := vidrav1alpha1.InfrahubSyncDestination{Destination: vidrav1alpha1.Destination{Cluster: fleet.Members[0].Name, Namespace: "team-a"}}
	trickler := infrahubtest.New(infrahubtest.Options{AllowAnonymous: true})
	t.Cleanup(trickler.Close)
	trickler.Put("main", infrahubtest.Artifact{ID: "trickled", Name: "trickled", TargetLabel: "t1", DefinitionName: "d", Content: configMap("trickled", strings.Repeat("x", 4096))})
	trickler.SetFault(infrahubtest.Fault{Path: "/api/artifact/", Trickle: 100 * time.Millisecond})
	var tricklers []client.Object
	for i := range sharedWorkers {
		sync := anonymousSync(fmt.Sprintf("trickled-%d", i), trickler.URL(), "trickled", dest)
		if err := fleet.Hub.Client.Create(ctx, sync); err != nil {
			t.Fatal(err)
		}
		cleanup(t, fleet.Hub.Client, sync)
		tricklers = append(tricklers, sync)
	}
	testfleet.Eventually(t, objectsTimeout, "the trickling Infrahub's downloads begun", func() (bool, error) {
		return trickler.TotalDownloads() >= workersShare, nil
	})

	other := infrahubtest.New(infrahubtest.Options{AllowAnonymous: true})
	t.Cleanup(other.Close)
	other.Put("main", infrahubtest.Artifact{ID: "beside", Name: "beside", TargetLabel: "t1", DefinitionName: "d", Content: configMap("beside-trickler", "v")})
	beside := anonymousSync("beside-trickler", other.URL(), "beside", dest)
	if err := fleet.Hub.Client.Create(ctx, beside); err != nil {
		t.Fatal(err)
	}
	cleanup(t, fleet.Hub.Client, beside)
	readyBeforeAny(t, fleet, beside, tricklers, vidrav1alpha1.ReasonBundleFailed)
	// The trickled downloads are given up as stalled, well before the request timeout.
	testfleet.Eventually(t, objectsTimeout, "a trickled sync given up as stalled", func() (bool, error) {
		c := readyCondition(t, fleet, tricklers[0])
		return c != nil && c.Reason == vidrav1alpha1.ReasonBundleFailed && strings.Contains(c.Message, "the answer stalled"), fmt.Errorf("Ready %+v", c)
	})
}

// tricklingInfrahubsOfOneTenant: one tenant's syncs read two trickling Infrahubs, as
// many per Infrahub as its share. Before, each Infrahub held its share, and together
// they held every worker: another team's sync waited until they were given up. Now the
// tenant holds no more than its share of the workers, whichever servers its syncs read.
func tricklingInfrahubsOfOneTenant(t *testing.T, fleet *testfleet.Fleet) {
	ctx := context.Background()
	dest := vidrav1alpha1.InfrahubSyncDestination{Destination: vidrav1alpha1.Destination{Cluster: fleet.Members[0].Name, Namespace: "team-a"}}
	var tricklers []client.Object
	var servers []*infrahubtest.Server
	for h := range 2 {
		trickler := infrahubtest.New(infrahubtest.Options{AllowAnonymous: true})
		t.Cleanup(trickler.Close)
		trickler.Put("main", infrahubtest.Artifact{ID: "tenant-trickled", Name: "tenant-trickled", TargetLabel: "t1", DefinitionName: "d", Content: configMap("tenant-trickled", strings.Repeat("x", 4096))})
		trickler.SetFault(infrahubtest.Fault{Path: "/api/artifact/", Trickle: 100 * time.Millisecond})
		servers = append(servers, trickler)
		for i := range workersShare {
			sync := anonymousSync(fmt.Sprintf("tenant-trickled-%d-%d", h, i), trickler.URL(), "tenant-trickled", dest)
			sync.Annotations = map[string]string{vidrav1alpha1.RequestedByAnnotation: "slow-tenant"}
			if err := fleet.Hub.Client.Create(ctx, sync); err != nil {
				t.Fatal(err)
			}
			cleanup(t, fleet.Hub.Client, sync)
			tricklers = append(tricklers, sync)
		}
	}
	testfleet.Eventually(t, objectsTimeout, "the tenant's trickled downloads begun", func() (bool, error) {
		return servers[0].TotalDownloads()+servers[1].TotalDownloads() >= workersShare, nil
	})

	other := infrahubtest.New(infrahubtest.Options{AllowAnonymous: true})
	t.Cleanup(other.Close)
	other.Put("main", infrahubtest.Artifact{ID: "beside-tenant", Name: "beside-tenant", TargetLabel: "t1", DefinitionName: "d", Content: configMap("beside-tenant", "v")})
	beside := anonymousSync("beside-tenant", other.URL(), "beside-tenant", dest)
	beside.Annotations = map[string]string{vidrav1alpha1.RequestedByAnnotation: "other-team"}
	if err := fleet.Hub.Client.Create(ctx, beside); err != nil {
		t.Fatal(err)
	}
	cleanup(t, fleet.Hub.Client, beside)
	readyBeforeAny(t, fleet, beside, tricklers, vidrav1alpha1.ReasonBundleFailed)
}

func anonymousSync(name, url, artifact string, dest vidrav1alpha1.InfrahubSyncDestination) *vidrav1alpha1.InfrahubSync {
	return &vidrav1alpha1.InfrahubSync{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: vidrav1alpha1.InfrahubSyncSpec{
		Source:      vidrav1alpha1.InfrahubSyncSource{InfrahubAPIURL: url, InsecureAllowHTTP: true, ArtefactName: artifact},
		Destination: dest,
		Interval:    &metav1.Duration{Duration: time.Hour},
		// The sync's work on the hub is what is asserted, not the member's: there an
		// earlier case left namespace team-a terminating (no namespace controller runs).
		Wait: ptr.To(false),
	}}
}

// readyBeforeAny waits until obj is Ready, then checks that none of others had reached
// Ready or the reason meanwhile: they waited on the slow side while obj was delivered.
func readyBeforeAny(t *testing.T, fleet *testfleet.Fleet, obj client.Object, others []client.Object, reason string) {
	t.Helper()
	testfleet.Eventually(t, objectsTimeout, obj.GetName()+" Ready", func() (bool, error) {
		c := readyCondition(t, fleet, obj)
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Errorf("Ready %+v", c)
	})
	for _, o := range others {
		if c := readyCondition(t, fleet, o); c != nil && (c.Status == metav1.ConditionTrue || c.Reason == reason) {
			t.Errorf("%s, on the slow side, was through (%s: %s) before %s: they shared no worker", o.GetName(), c.Reason, c.Message, obj.GetName())
		}
	}
}

func readyCondition(t *testing.T, fleet *testfleet.Fleet, obj client.Object) *metav1.Condition {
	t.Helper()
	fresh := obj.DeepCopyObject().(client.Object)
	if err := fleet.Hub.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), fresh); err != nil {
		t.Fatal(err)
	}
	var conditions []metav1.Condition
	switch o := fresh.(type) {
	case *vidrav1alpha1.VidraResource:
		conditions = o.Status.Conditions
	case *vidrav1alpha1.InfrahubSync:
		conditions = o.Status.Conditions
	}
	return meta.FindStatusCondition(conditions, vidrav1alpha1.ConditionReady)
}
