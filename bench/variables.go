package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// variablesResult is what one GitSync with spec.postBuild cost, delivered to Clusters
// clusters whose variables (the sync's region, each cluster's ring label) make up
// VariableSets distinct sets: clusters of equal variables share one build, so each
// revision should take VariableSets builds, however many clusters there are.
type variablesResult struct {
	Clusters         int `json:"clusters"`
	VariableSets     int `json:"variableSets"`
	Revisions        int `json:"revisions"`
	ObjectsPerBundle int `json:"objectsPerBundle"`
	// Builds are the operator's vidra_source_builds_total{kind="GitSync",result="ok"}
	// over the revisions timed (the first delivery left out), and BuildsPerRevision
	// their mean.
	Builds            float64 `json:"builds"`
	BuildsPerRevision float64 `json:"buildsPerRevision"`
	// ReadySeconds are each revision's time from the request to sync it (its commit
	// made) to the GitSync Ready at that revision on every cluster.
	ReadySecondsP50 float64   `json:"readySecondsP50"`
	ReadySecondsP90 float64   `json:"readySecondsP90"`
	ReadySeconds    []float64 `json:"readySecondsByRevision"`
}

// The variables phase's names: its clusters' (a prefix of their own, so that the fleet
// phase's watches and clear leave them alone), the label its enrollment Secrets and
// VidraClusters carry, the namespace its bundle goes to, its GitSync and repository.
const (
	variablesClusterPrefix = "vars-"
	variablesLabel         = "bench.vidra.infrahub.operators.com/variables"
	variablesNamespace     = "bench-vars"
	variablesSyncName      = "bench-variables"
	variablesRepo          = "variables"
	// variablesBranch is the branch the sync follows; its revisions read <branch>@sha1:<commit>.
	variablesBranch = "main"
)

// variablesRun is the variables phase's state: its clusters' fronts and its Git server,
// which clean removes.
type variablesRun struct {
	*bench
	fronts   fronts
	clusters []variablesCluster
	git      *gitHost
	repo     *gitserver.Repo
	// previews: the GitSync previews the branches preview/* (the previews phase).
	previews bool
}

// variablesCluster is one cluster of the phase and the ring label its variables name.
type variablesCluster struct {
	fleetCluster
	ring string
}

// measureVariables delivers one GitSync with spec.postBuild to -variables-clusters
// clusters of -variables-sets rings, then commits -variables-revisions revisions, each
// synced at once and timed to Ready, and counts the bundles the operator built for them.
// Whatever the phase set up is removed when it ends, measured or not.
func (b *bench) measureVariables(ctx context.Context, r *results) (err error) {
	v := &variablesRun{bench: b}
	defer func() { err = errors.Join(err, v.clean(ctx)) }()
	if err := v.setUp(ctx); err != nil {
		return err
	}
	res, err := v.measure(ctx)
	if err != nil {
		return err
	}
	r.Variables = &res
	return nil
}

// setUp enrolls the phase's clusters, serves the repository at its first revision and
// delivers it: what is measured after is the revisions that follow, not the first
// delivery (each cluster's first dry run, its connections).
func (v *variablesRun) setUp(ctx context.Context) error {
	started := time.Now()
	if err := v.openClusters(ctx); err != nil {
		return err
	}
	if err := v.enroll(ctx); err != nil {
		return err
	}
	fmt.Fprintf(v.log, "  %d clusters of %d rings enrolled in %s\n", len(v.clusters), v.VariablesSets, since(started))
	started = time.Now()
	if err := v.serveRepo(); err != nil {
		return err
	}
	commit, err := v.commit(0)
	if err != nil {
		return err
	}
	if err := v.fleet.Hub.Client.Create(ctx, v.gitSync()); err != nil {
		return fmt.Errorf("create GitSync %s: %w", variablesSyncName, err)
	}
	if err := v.waitReady(ctx, commit); err != nil {
		return fmt.Errorf("the first revision: %w", err)
	}
	fmt.Fprintf(v.log, "  the first revision delivered in %s\n", since(started))
	return nil
}

// measure commits each revision, asks for a sync at once and times it to Ready, with
// the operator's build counter read before the first and after the last.
func (v *variablesRun) measure(ctx context.Context) (variablesResult, error) {
	res := variablesResult{Clusters: len(v.clusters), VariableSets: v.VariablesSets, Revisions: v.VariablesRevisions, ObjectsPerBundle: v.Objects}
	before, err := v.gitSyncBuilds(ctx)
	if err != nil {
		return res, err
	}
	var ready []time.Duration
	for k := 1; k <= v.VariablesRevisions; k++ {
		commit, err := v.commit(k)
		if err != nil {
			return res, err
		}
		start := time.Now()
		if err := v.requestSync(ctx); err != nil {
			return res, err
		}
		if err := v.waitReady(ctx, commit); err != nil {
			return res, fmt.Errorf("revision %d: %w", k, err)
		}
		elapsed := time.Since(start)
		ready = append(ready, elapsed)
		res.ReadySeconds = append(res.ReadySeconds, elapsed.Seconds())
		fmt.Fprintf(v.log, "    revision %d of %d Ready on %d clusters in %s\n", k, v.VariablesRevisions, len(v.clusters), elapsed.Round(time.Millisecond))
	}
	after, err := v.gitSyncBuilds(ctx)
	if err != nil {
		return res, err
	}
	res.Builds = after - before
	res.BuildsPerRevision = res.Builds / float64(v.VariablesRevisions)
	res.ReadySecondsP50, res.ReadySecondsP90 = percentile(ready, 50)/1000, percentile(ready, 90)/1000
	return res, nil
}

// gitSync delivers the repository's deploy/ to every cluster of the phase, with the
// variable region set for all. Its VidraResources are dry runs: the clusters are fronts
// of a few members, and those fronting one member would otherwise contend for the same
// objects; a server-side dry run still sends every object to the member and writes
// nothing. Its interval is an hour: the bench's requests alone sync it, one per commit.
func (v *variablesRun) gitSync() *vidrav1alpha1.GitSync {
	gs := &vidrav1alpha1.GitSync{
		ObjectMeta: metav1.ObjectMeta{Name: variablesSyncName},
		Spec: vidrav1alpha1.GitSyncSpec{
			Source: vidrav1alpha1.GitSource{
				URL: v.repo.URL(), Ref: &vidrav1alpha1.GitRef{Branch: variablesBranch}, Path: "deploy",
				InsecureAllowHTTP: true, // the bench's Git server, on loopback
			},
			PostBuild: &vidrav1alpha1.PostBuild{Substitute: map[string]string{"region": "eu"}},
			SyncOptions: vidrav1alpha1.SyncOptions{
				Destination: vidrav1alpha1.SyncDestination{
					Destination:     vidrav1alpha1.Destination{Namespace: variablesNamespace},
					ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{variablesLabel: "true"}},
				},
				Interval: &metav1.Duration{Duration: time.Hour},
				Template: &vidrav1alpha1.VidraResourceTemplate{DryRun: true},
			},
		},
	}
	if v.previews {
		gs.Spec.Previews = &vidrav1alpha1.Previews{Refs: []string{previewsRefs}, MaxRefs: 20}
	}
	return gs
}

// requestSync asks for a sync of the GitSync now, as a push webhook (or kubectl
// annotate) does.
func (v *variablesRun) requestSync(ctx context.Context) error {
	return v.requestSyncOf(ctx, variablesSyncName)
}

func (v *variablesRun) requestSyncOf(ctx context.Context, name string) error {
	return requestGitSync(ctx, v.fleet.Hub.Client, name)
}

// requestGitSync asks for a sync of a GitSync now, as a push webhook (or kubectl
// annotate) does.
func requestGitSync(ctx context.Context, hub client.Client, name string) error {
	gs := &vidrav1alpha1.GitSync{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := hub.Patch(ctx, gs, requestedAtPatch(vidrav1alpha1.RequestedAtAnnotation)); err != nil {
		return fmt.Errorf("request a sync of GitSync %s: %w", name, err)
	}
	return nil
}

// requestedAtPatch sets the annotation to now: Vidra's requested-at and Flux's
// reconcile.fluxcd.io/requestedAt each ask for a sync whenever their value changes.
func requestedAtPatch(annotation string) client.Patch {
	return client.RawPatch(types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, annotation, time.Now().Format(time.RFC3339Nano)))
}

// waitReady waits until the GitSync is Ready at the commit, on every cluster.
func (v *variablesRun) waitReady(ctx context.Context, commit string) error {
	return v.waitReadyOf(ctx, variablesSyncName, commit)
}

func (v *variablesRun) waitReadyOf(ctx context.Context, name, commit string) error {
	return waitGitSyncReady(ctx, v.fleet.Hub.Client, pollEvery, name, variablesBranch+"@sha1:"+commit, len(v.clusters))
}

// waitGitSyncReady waits until the GitSync is Ready at revision on every one of its
// clusters, looking every so often.
func waitGitSyncReady(ctx context.Context, hub client.Client, every time.Duration, name, revision string, clusters int) error {
	gs := &vidrav1alpha1.GitSync{}
	what := fmt.Sprintf("GitSync %s Ready at %s on %d clusters", name, revision, clusters)
	err := testfleet.WaitFor(ctx, every, 10*time.Minute, what, func() (bool, error) {
		if err := hub.Get(ctx, client.ObjectKey{Name: name}, gs); err != nil {
			return false, err
		}
		return readyAtRevision(gs, revision, clusters), nil
	})
	if err != nil {
		if c := meta.FindStatusCondition(gs.Status.Conditions, vidrav1alpha1.ConditionReady); c != nil {
			return fmt.Errorf("%w (Ready %s, %s: %s)", err, c.Status, c.Reason, c.Message)
		}
	}
	return err
}

// readyAtRevision says whether gs names revision as its source's, is Ready for its
// current generation, and counts every one of its clusters Ready at that revision: a
// Ready condition left from the revision before is not enough.
func readyAtRevision(gs *vidrav1alpha1.GitSync, revision string, clusters int) bool {
	src, counts := gs.Status.Source, gs.Status.Clusters
	ready := meta.FindStatusCondition(gs.Status.Conditions, vidrav1alpha1.ConditionReady)
	return src != nil && src.Revision == revision &&
		ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == gs.Generation &&
		gs.Status.ObservedGeneration == gs.Generation &&
		counts != nil && int(counts.Total) == clusters && int(counts.Ready) == clusters
}

// gitSyncBuilds is the operator's vidra_source_builds_total{kind="GitSync",result="ok"}:
// 0 before its first build, when the series does not exist yet.
func (b *bench) gitSyncBuilds(ctx context.Context) (float64, error) {
	var builds float64
	err := b.readMetrics(ctx, func(series string, v float64) {
		if strings.HasPrefix(series, "vidra_source_builds_total{") {
			if labels := parseLabels(series); labels["kind"] == "GitSync" && labels["result"] == "ok" {
				builds += v
			}
		}
	})
	if err != nil {
		return 0, fmt.Errorf("read the operator's metrics: %w", err)
	}
	return builds, nil
}

// targets are the variables phase's: one build per distinct set of variables, per
// revision (none when the phase did not run).
func (res *variablesResult) targets() []check {
	if res == nil {
		return nil
	}
	want := float64(res.VariableSets)
	return []check{{"variables: builds per revision", res.BuildsPerRevision, fmt.Sprintf("== %d (variable sets)", res.VariableSets), res.BuildsPerRevision == want}}
}

// print prints the variables phase's figures, as a row of the table.
func (res *variablesResult) print() string {
	return fmt.Sprintf("%.2f builds per revision (%.0f over %d revisions); request to sync to Ready on every cluster p50 %.2f s, p90 %.2f s (%s s)",
		res.BuildsPerRevision, res.Builds, res.Revisions, res.ReadySecondsP50, res.ReadySecondsP90, joined(res.ReadySeconds, "%.2f"))
}
