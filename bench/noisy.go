package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/runtime/conditions"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/slowadmission"
)

// noisyResult is what one team's bundle costs while another team misbehaves, beside
// the same bundle on a quiet hub (the shared hub's target: within 2x quiet).
type noisyResult struct {
	// QuietMs is the longest time, over the rounds, from creating a bundle on the first
	// member to Ready; the others are the same beside each misbehaviour.
	QuietMs float64 `json:"quietMs"`
	// UnknownServerMs is the same while the noisy team has UnknownServers bundles of
	// UnknownServerKiB each naming clusters that never come.
	UnknownServers   int     `json:"unknownServers"`
	UnknownServerKiB int     `json:"unknownServerKiB"`
	UnknownServerMs  float64 `json:"unknownServerMs"`
	// SlowWebhookMs is the same while the second member's admission webhook holds each of
	// the noisy team's SlowBundles writes for SlowWebhookSeconds.
	SlowBundles        int     `json:"slowBundles"`
	SlowWebhookSeconds float64 `json:"slowWebhookSeconds"`
	SlowWebhookMs      float64 `json:"slowWebhookMs"`
	// SlowInFlight is how many of those writes the webhook held as the timing began.
	SlowInFlight int64 `json:"slowInFlight"`
	// SyncQuietMs is the longest time from creating an InfrahubSync of one artifact to
	// Ready; SyncTricklingMs the same while the noisy team's TricklingSyncs read an
	// Infrahub that sends a byte every 100 ms.
	SyncQuietMs     float64 `json:"syncQuietMs"`
	TricklingSyncs  int     `json:"tricklingSyncs"`
	SyncTricklingMs float64 `json:"syncTricklingMs"`
}

// measureNoisy times the unaffected team's bundle quiet, then beside each misbehaviour.
func (b *bench) measureNoisy(ctx context.Context, r *results) error {
	if len(b.members) < 2 {
		return fmt.Errorf("the noisy phase needs two members, -members is %d", len(b.members))
	}
	nr := &noisyResult{UnknownServers: 200, UnknownServerKiB: 256, SlowBundles: 2 * b.Workers, SlowWebhookSeconds: 20}
	var err error
	if nr.QuietMs, err = b.timeUnaffected(ctx, "noisy-quiet"); err != nil {
		return err
	}
	// (a) Bundles naming clusters that never come, each large enough to cost a decoding.
	large := bundle("large", nr.UnknownServerKiB*1024/len(bundle("large", 1)))
	var noisy []string
	for i := range nr.UnknownServers {
		name := fmt.Sprintf("noisy-nowhere-%d", i)
		dest := vidrav1alpha1.Destination{Server: fmt.Sprintf("https://never-%d.example.com:6443", i), Namespace: "noisy"}
		if err := b.createBundle(ctx, name, dest, large); err != nil {
			return err
		}
		noisy = append(noisy, name)
	}
	// What is timed is what they cost as they wait, not the first look at each (any 200
	// new bundles queue ahead of the next).
	if err := b.waitReason(ctx, noisy, vidrav1alpha1.ReasonClusterNotFound); err != nil {
		return err
	}
	if nr.UnknownServerMs, err = b.timeUnaffected(ctx, "noisy-nowhere"); err != nil {
		return err
	}
	if err := b.deleteBundles(ctx, noisy); err != nil {
		return err
	}
	// (d) A member whose admission webhook holds every write.
	slow := b.members[1]
	hook, err := slowadmission.Start(ctx, slow.Client, "noisy-slow", time.Duration(nr.SlowWebhookSeconds)*time.Second)
	if err != nil {
		return err
	}
	defer func() { _ = hook.Stop(ctx, slow.Client) }()
	hook.SetSlow(true)
	noisy = noisy[:0]
	for i := range nr.SlowBundles {
		name := fmt.Sprintf("noisy-slow-%d", i)
		if err := b.createBundle(ctx, name, vidrav1alpha1.Destination{Cluster: slow.Name, Namespace: "noisy-slow"}, bundle(name, b.Objects)); err != nil {
			return err
		}
		noisy = append(noisy, name)
	}
	for hook.InFlight() == 0 {
		time.Sleep(pollEvery)
	}
	time.Sleep(time.Second) // every worker they may take, taken
	nr.SlowInFlight = hook.InFlight()
	if nr.SlowWebhookMs, err = b.timeUnaffected(ctx, "noisy-slow"); err != nil {
		return err
	}
	if err := hook.Stop(ctx, slow.Client); err != nil {
		return err
	}
	if err := b.deleteBundles(ctx, noisy); err != nil {
		return err
	}
	r.Noisy = nr
	return b.measureTrickling(ctx, nr)
}

// measureTrickling times one team's InfrahubSync quiet, then while another team's syncs
// read an Infrahub that trickles its artifacts.
func (b *bench) measureTrickling(ctx context.Context, nr *noisyResult) error {
	dest := vidrav1alpha1.InfrahubSyncDestination{Destination: vidrav1alpha1.Destination{Cluster: b.members[0].Name, Namespace: "team-a"}}
	own := infrahubtest.New(infrahubtest.Options{AllowAnonymous: true})
	defer own.Close()
	own.Put("main", infrahubtest.Artifact{ID: "team-a", Name: "team-a", TargetLabel: "t", DefinitionName: "d", Content: bundle("team-a-sync", b.Objects)})
	var err error
	if nr.SyncQuietMs, err = b.timeSync(ctx, "noisy-quiet", own.URL(), dest); err != nil {
		return err
	}
	trickler := infrahubtest.New(infrahubtest.Options{AllowAnonymous: true})
	defer trickler.Close()
	trickler.Put("main", infrahubtest.Artifact{ID: "noisy", Name: "noisy", TargetLabel: "t", DefinitionName: "d", Content: bundle("noisy-sync", b.Objects)})
	trickler.SetFault(infrahubtest.Fault{Path: "/api/artifact/", Trickle: 100 * time.Millisecond})
	nr.TricklingSyncs = 2 * b.Workers
	var noisy []client.Object
	defer func() {
		for _, o := range noisy {
			_ = b.fleet.Hub.Client.Delete(ctx, o)
		}
	}()
	for i := range nr.TricklingSyncs {
		sync := infrahubSync(fmt.Sprintf("noisy-trickled-%d", i), trickler.URL(), "noisy", dest)
		if err := b.fleet.Hub.Client.Create(ctx, sync); err != nil {
			return fmt.Errorf("create InfrahubSync %s: %w", sync.Name, err)
		}
		noisy = append(noisy, sync)
	}
	for trickler.TotalDownloads() == 0 {
		time.Sleep(pollEvery)
	}
	nr.SyncTricklingMs, err = b.timeSync(ctx, "noisy-trickling", own.URL(), dest)
	return err
}

// timeSync is the longest, over the rounds, of the time one InfrahubSync of the unaffected
// team takes from creation to Ready.
func (b *bench) timeSync(ctx context.Context, round, url string, dest vidrav1alpha1.InfrahubSyncDestination) (float64, error) {
	var times []float64
	for i := range b.Rounds {
		sync := infrahubSync(fmt.Sprintf("%s-team-a-%d", round, i), url, "team-a", dest)
		start := time.Now()
		if err := b.fleet.Hub.Client.Create(ctx, sync); err != nil {
			return 0, fmt.Errorf("create InfrahubSync %s: %w", sync.Name, err)
		}
		for !conditions.IsReady(sync) {
			if time.Since(start) > 10*time.Minute {
				return 0, fmt.Errorf("InfrahubSync %s not Ready after 10m: %+v", sync.Name, sync.Status.Conditions)
			}
			time.Sleep(pollEvery)
			if err := b.fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(sync), sync); err != nil {
				return 0, err
			}
		}
		times = append(times, float64(time.Since(start).Milliseconds()))
		if err := b.fleet.Hub.Client.Delete(ctx, sync); err != nil {
			return 0, err
		}
	}
	return slices.Max(times), nil
}

func infrahubSync(name, url, artifact string, dest vidrav1alpha1.InfrahubSyncDestination) *vidrav1alpha1.InfrahubSync {
	return &vidrav1alpha1.InfrahubSync{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: vidrav1alpha1.InfrahubSyncSpec{
		Source:      vidrav1alpha1.InfrahubSyncSource{InfrahubAPIURL: url, InsecureAllowHTTP: true, ArtefactName: artifact},
		Destination: dest,
		Interval:    &metav1.Duration{Duration: time.Hour},
	}}
}

// timeUnaffected is the longest, over the rounds, of the time one bundle of the unaffected
// team takes from creation to Ready on the first member: the first round meets the noisy
// team's work at its heaviest, which a median would hide.
func (b *bench) timeUnaffected(ctx context.Context, round string) (float64, error) {
	var times []float64
	for i := range b.Rounds {
		name := fmt.Sprintf("%s-team-a-%d", round, i)
		start := time.Now()
		if err := b.createBundle(ctx, name, vidrav1alpha1.Destination{Cluster: b.members[0].Name, Namespace: "team-a"}, bundle(name, b.Objects)); err != nil {
			return 0, err
		}
		// Read by name: a listing would carry the noisy team's bundles too, and time the bench.
		vr := &vidrav1alpha1.VidraResource{}
		for !conditions.IsReady(vr) {
			if time.Since(start) > 10*time.Minute {
				return 0, fmt.Errorf("VidraResource %s not Ready after 10m: %+v", name, vr.Status.Conditions)
			}
			time.Sleep(pollEvery)
			if err := b.fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: name}, vr); err != nil {
				return 0, err
			}
		}
		times = append(times, float64(time.Since(start).Milliseconds()))
	}
	return slices.Max(times), nil
}

// waitReason waits until every named VidraResource's Ready condition has the reason.
func (b *bench) waitReason(ctx context.Context, names []string, reason string) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var list vidrav1alpha1.VidraResourceList
		if err := b.fleet.Hub.Client.List(ctx, &list); err != nil {
			return err
		}
		seen := 0
		for i := range list.Items {
			c := meta.FindStatusCondition(list.Items[i].Status.Conditions, vidrav1alpha1.ConditionReady)
			if c != nil && c.Reason == reason && slices.Contains(names, list.Items[i].Name) {
				seen++
			}
		}
		if seen == len(names) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d VidraResources %s after 10m", seen, len(names), reason)
		}
		time.Sleep(time.Second)
	}
}

func (b *bench) createBundle(ctx context.Context, name string, dest vidrav1alpha1.Destination, manifest string) error {
	vr := &vidrav1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: vidrav1alpha1.VidraResourceSpec{Destination: dest, Manifest: manifest}}
	if err := b.fleet.Hub.Client.Create(ctx, vr); err != nil {
		return fmt.Errorf("create VidraResource %s: %w", name, err)
	}
	return nil
}

// deleteBundles deletes the noisy team's bundles, without waiting for them to go.
func (b *bench) deleteBundles(ctx context.Context, names []string) error {
	for _, name := range names {
		vr := &vidrav1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := client.IgnoreNotFound(b.fleet.Hub.Client.Delete(ctx, vr)); err != nil {
			return fmt.Errorf("delete VidraResource %s: %w", name, err)
		}
	}
	return nil
}

// print prints the noisy phase's figures.
func (nr *noisyResult) print() string {
	return strings.Join([]string{
		fmt.Sprintf("quiet %.0f ms", nr.QuietMs),
		fmt.Sprintf("beside %d bundles of %d KiB naming clusters that never come %.0f ms (%.2fx)", nr.UnknownServers, nr.UnknownServerKiB, nr.UnknownServerMs, nr.UnknownServerMs/nr.QuietMs),
		fmt.Sprintf("beside %d bundles held %.0f s each by a member's admission webhook (%d held at once) %.0f ms (%.2fx)", nr.SlowBundles, nr.SlowWebhookSeconds, nr.SlowInFlight, nr.SlowWebhookMs, nr.SlowWebhookMs/nr.QuietMs),
		fmt.Sprintf("an InfrahubSync quiet %.0f ms, beside %d syncs of a trickling Infrahub %.0f ms (%.2fx)", nr.SyncQuietMs, nr.TricklingSyncs, nr.SyncTricklingMs, nr.SyncTricklingMs/nr.SyncQuietMs),
	}, "; ")
}
