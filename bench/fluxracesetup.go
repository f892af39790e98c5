package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// setUp opens the clusters, serves the repository at
// its first commit, starts both sides afresh (so that their peak memory is the phase's)
// and has each deliver that commit everywhere: what is measured after is the commits
// that follow, not each cluster's first connection.
func (race *fluxRace) setUp(ctx context.Context) error {
	started := time.Now()
	if err := race.installFluxCRDs(ctx); err != nil {
		return err
	}
	if err := race.openClusters(ctx); err != nil {
		return err
	}
	var err error
	if race.git, race.repo, err = serveGitRepo(race.log, raceRepo); err != nil {
		return err
	}
	commit, err := race.commit(0)
	if err != nil {
		return err
	}
	// Vidra at its default log level, as Flux's controllers run at theirs, resyncing at
	// the hour Flux's objects are given.
	race.operatorRestarted = true
	if err := race.restartOperator(ctx, "fluxrace", time.Hour, "--zap-log-level=info"); err != nil {
		return err
	}
	if err := race.startFlux(ctx); err != nil {
		return err
	}
	race.peaks = sampleRSS(ctx, raceEvery, race.pids())
	fmt.Fprintf(race.log, "  %d clusters opened, both sides started in %s\n", len(race.clusters), since(started))
	revision := raceBranch + "@sha1:" + commit
	started = time.Now()
	if err := race.deliverWithVidra(ctx, revision); err != nil {
		return err
	}
	fmt.Fprintf(race.log, "  Vidra delivered the first commit in %s\n", since(started))
	started = time.Now()
	if err := race.deliverWithFlux(ctx, revision); err != nil {
		return err
	}
	fmt.Fprintf(race.log, "  Flux delivered the first commit in %s\n", since(started))
	return nil
}

// installFluxCRDs installs the CRDs the controllers' modules ship on the hub, and the
// namespace Flux runs in.
func (race *fluxRace) installFluxCRDs(ctx context.Context) error {
	var dirs []string
	for _, b := range race.fluxBuilds {
		dirs = append(dirs, b.crds)
	}
	if _, err := envtest.InstallCRDs(race.fleet.Hub.Config, envtest.CRDInstallOptions{Paths: dirs, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("install Flux's CRDs: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: raceFluxNamespace}}
	if err := client.IgnoreAlreadyExists(race.fleet.Hub.Client.Create(ctx, ns)); err != nil {
		return fmt.Errorf("create namespace %s: %w", raceFluxNamespace, err)
	}
	return nil
}

// openClusters opens a front for each of the phase's clusters, spread over the members
// round robin, and creates each side's namespace of each cluster on the member it
// fronts: clusters fronting one member would otherwise write the same objects.
func (race *fluxRace) openClusters(ctx context.Context) error {
	for i := range race.RaceClusters {
		c, err := race.fronts.openCluster(ctx, race.members[i%len(race.members)], raceFront+i, fmt.Sprintf("%s%04d", raceClusterPrefix, i))
		if err != nil {
			return err
		}
		race.clusters = append(race.clusters, c)
	}
	return forEach(ctx, race.clusters, func(c fleetCluster) error {
		for _, name := range []string{vidraNamespaceOf(c), fluxNamespaceOf(c)} {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
			if err := client.IgnoreAlreadyExists(c.member.Client.Create(ctx, ns)); err != nil {
				return fmt.Errorf("create namespace %s on %s: %w", name, c.member.Name, err)
			}
		}
		return nil
	})
}

// vidraNamespaceOf and fluxNamespaceOf are where each side puts a cluster's objects:
// the bundle names the first, ${cluster.name} put in by Vidra; Flux's targetNamespace
// sets the second.
func vidraNamespaceOf(c fleetCluster) string { return "vidra-" + c.name }
func fluxNamespaceOf(c fleetCluster) string  { return "flux-" + c.name }

// commit commits revision k of the repository and returns the commit.
func (race *fluxRace) commit(k int) (string, error) {
	return commitFiles(race.git, race.repo, raceBranch, raceFiles(race.Objects, k), k)
}

// raceFiles are revision k of the repository: n ConfigMaps as plain manifests, and a
// Kustomize overlay of them that both sides deliver. Each ConfigMap names the namespace
// Vidra puts it in; Flux's targetNamespace replaces it.
func raceFiles(n, k int) map[string]string {
	docs := make([]string, 0, n)
	for i := range n {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: race-%d\n  namespace: vidra-${cluster.name}\ndata:\n  revision: \"%d\"\n", i, k))
	}
	return map[string]string{
		"base/configmaps.yaml":       strings.Join(docs, "---\n"),
		"base/kustomization.yaml":    "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- configmaps.yaml\n",
		"overlay/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../base\nlabels:\n- pairs:\n    app.kubernetes.io/part-of: bench-fluxrace\n",
	}
}

// deliverWithVidra enrolls the clusters, each confined to its namespace, and creates the
// GitSync that delivers the overlay to them, then waits until it is Ready at revision.
func (race *fluxRace) deliverWithVidra(ctx context.Context, revision string) error {
	secrets := make([]*corev1.Secret, 0, len(race.clusters))
	for _, c := range race.clusters {
		secrets = append(secrets, enrollmentSecret(c, raceLabel, vidraNamespaceOf(c), nil))
	}
	race.enrolled = true
	if err := enrollLabeled(ctx, race.fleet.Hub.Client, secrets, raceLabel, "the fluxrace phase's"); err != nil {
		return err
	}
	if err := race.fleet.Hub.Client.Create(ctx, race.gitSync()); err != nil {
		return fmt.Errorf("create GitSync %s: %w", raceSyncName, err)
	}
	return waitGitSyncReady(ctx, race.fleet.Hub.Client, raceEvery, raceSyncName, revision, len(race.clusters))
}

// gitSync delivers the overlay to every cluster of the phase, ${cluster.name} put in
// for each. Its interval is an hour, as Flux's objects': the bench's requests alone sync
// it, one per commit.
func (race *fluxRace) gitSync() *vidrav1alpha1.GitSync {
	return &vidrav1alpha1.GitSync{
		ObjectMeta: metav1.ObjectMeta{Name: raceSyncName},
		Spec: vidrav1alpha1.GitSyncSpec{
			Source: vidrav1alpha1.GitSource{
				URL: race.repo.URL(), Ref: &vidrav1alpha1.GitRef{Branch: raceBranch}, Path: "overlay",
				InsecureAllowHTTP: true, // the bench's Git server, on loopback
			},
			PostBuild: &vidrav1alpha1.PostBuild{Substitute: map[string]string{"bench": "fluxrace"}},
			SyncOptions: vidrav1alpha1.SyncOptions{
				Destination: vidrav1alpha1.SyncDestination{
					ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{raceLabel: "true"}},
				},
				Interval: &metav1.Duration{Duration: time.Hour},
			},
		},
	}
}

// clean removes what the phase set up, each step whether the one before failed or not:
// Flux's objects (its controllers still running, so that they prune what they applied)
// and controllers, the GitSync, its VidraResources and the enrollments, the namespaces
// on the members, the fronts and the Git server; and puts the bench's operator back.
func (race *fluxRace) clean(ctx context.Context) error {
	started := time.Now()
	_, _ = race.peaks.stop() // when measure did not
	var errs []error
	if race.fluxObjects {
		errs = append(errs, race.removeFluxObjects(ctx))
	}
	race.stopFlux()
	if race.fluxObjects {
		errs = append(errs, race.dropFluxLeftovers(ctx))
	}
	if race.enrolled {
		errs = append(errs, removeSync(ctx, race.fleet.Hub.Client, vidrav1alpha1.LookupSyncKind("GitSync"), raceSyncName))
		errs = append(errs, unenrollLabeled(ctx, race.fleet.Hub.Client, raceLabel, "the fluxrace phase's"))
	}
	errs = append(errs, forEach(ctx, race.clusters, func(c fleetCluster) error {
		return errors.Join(removeNamespace(ctx, c.member, vidraNamespaceOf(c)), removeNamespace(ctx, c.member, fluxNamespaceOf(c)))
	}))
	errs = append(errs, race.fronts.close())
	if race.git != nil {
		errs = append(errs, race.git.close())
	}
	if race.operatorRestarted {
		errs = append(errs, race.restartOperator(ctx, "vidra-after-fluxrace", race.WorkloadResync))
	}
	fmt.Fprintf(race.log, "  cleared in %s\n", since(started))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("clear the fluxrace phase: %w", err)
	}
	return nil
}
