package operator

import (
	"fmt"
	"os"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/sourcesync"
	"github.com/vidra-operator/vidra/controllers/syncs"
	"github.com/vidra-operator/vidra/internal/fleet/clusterinfo"
	"github.com/vidra-operator/vidra/internal/fleet/credentials"
	"github.com/vidra-operator/vidra/internal/fleet/destination"
	"github.com/vidra-operator/vidra/internal/source/bundle"
	"github.com/vidra-operator/vidra/internal/source/dircache"
	"github.com/vidra-operator/vidra/internal/source/gitsource"
	"github.com/vidra-operator/vidra/internal/source/helmrender"
	"github.com/vidra-operator/vidra/internal/source/helmsource"
	"github.com/vidra-operator/vidra/internal/source/ocisource"
)

// setupSourceSyncs registers the GitSync, OCISync and HelmSync controllers, which share
// one cache of checkouts and artifacts on disk, and one budget of bytes for it.
func (o *Operator) setupSourceSyncs(metrics *sourcesync.Metrics, previews *syncs.PreviewMetrics, opts Options) error {
	local := o.Manager.GetLocalManager()
	if err := o.prepareSourceCache(&opts); err != nil {
		return err
	}
	secrets := sourcesync.Secrets{
		Reader:    local.GetAPIReader(),
		Gate:      credentials.NewGate(local.GetAPIReader(), local.GetClient(), opts.InfrahubSecretNamespace),
		Namespace: opts.InfrahubSecretNamespace,
	}
	build := bundle.Limits{MaxFiles: opts.SourceMaxFiles, MaxBytes: opts.SourceMaxBundleBytes}
	dirs := dircache.New(opts.SourceCacheDir, "fill-", dircache.DefaultMaxEntries, opts.SourceCacheBytes)
	git := &sourcesync.Git{
		Secrets: secrets,
		Cache:   gitsource.NewCache(dirs, gitsource.Limits{MaxRepoBytes: opts.GitMaxRepoBytes, MaxFiles: opts.SourceMaxFiles}),
		Build:   build,
		Timeout: opts.SourceTimeout,
	}
	artifacts := ocisource.NewCache(dirs, ocisource.Limits{
		MaxArtifactBytes: opts.OCIMaxArtifactBytes, MaxBytes: opts.OCIMaxArtifactBytes, MaxFiles: opts.SourceMaxFiles})
	oci := &sourcesync.OCI{Secrets: secrets, Cache: artifacts, Build: build, Timeout: opts.SourceTimeout}
	helm, err := o.helmSource(opts, secrets, artifacts)
	if err != nil {
		return err
	}
	for _, kind := range []struct {
		kind     string
		source   sourcesync.Source
		renderer sourcesync.Renderer
	}{
		{"GitSync", git, nil},
		{"OCISync", oci, nil},
		{"HelmSync", nil, helm},
	} {
		r := &syncs.Reconciler{
			Kind: &sourcesync.Kind{
				Sync: vidrav1alpha1.LookupSyncKind(kind.kind), Source: kind.source, Renderer: kind.renderer,
				PostBuild: &sourcesync.PostBuild{Secrets: secrets, Hub: local.GetClient()},
				Content:   o.Content, Metrics: metrics,
			},
			Hub: local.GetClient(), HubReader: local.GetAPIReader(), Content: o.Content,
			Recorder: o.events, Metrics: metrics.For(kind.kind), Guards: o.guards,
			PerSourceSyncs: opts.MaxConcurrentSyncsPerSource, PerRequesterSyncs: opts.MaxConcurrentSyncsPerRequester,
			Previews: &syncs.Previews{DryRun: o.resources, Clusters: opts.PreviewClusters, Metrics: previews,
				Log: opts.Logger.WithName("previews").WithValues("kind", kind.kind)},
		}
		if err := r.SetupWithManager(local, opts.MaxConcurrentSyncs); err != nil {
			return err
		}
	}
	return nil
}

// prepareSourceCache checks the source cache's bound against the largest fetch, and
// makes a temporary directory for it when none is given (removed when the operator
// stops).
func (o *Operator) prepareSourceCache(opts *Options) error {
	if largest := max(opts.GitMaxRepoBytes, opts.OCIMaxArtifactBytes); opts.SourceCacheBytes > 0 && opts.SourceCacheBytes < largest {
		return fmt.Errorf("source cache: --source-cache-bytes (%d) is smaller than one fetch may be (%d, the larger of --git-max-repo-bytes and --oci-max-artifact-bytes)",
			opts.SourceCacheBytes, largest)
	}
	if opts.SourceCacheDir == "" {
		dir, err := os.MkdirTemp("", "vidra-sources-")
		if err != nil {
			return fmt.Errorf("source cache: %w", err)
		}
		opts.SourceCacheDir, o.temporarySourceCache = dir, dir
	}
	return nil
}

// helmSource is the HelmSync's renderer: charts from repositories and registries (those
// in registries shared with OCISyncs' cache), rendered for each cluster as it is, in a
// bounded child process when the options name one.
func (o *Operator) helmSource(opts Options, secrets sourcesync.Secrets, artifacts *ocisource.Cache) (*sourcesync.Helm, error) {
	local := o.Manager.GetLocalManager()
	resolver := destination.Resolver{DisableLocalCluster: opts.DisableLocalCluster}
	if o.Provider != nil {
		resolver.Fleet = o.Provider
	}
	helm := &sourcesync.Helm{
		Secrets: secrets,
		Charts: helmsource.New(helmsource.Options{
			Limits: helmsource.Limits{MaxIndexBytes: opts.HelmMaxIndexBytes, MaxChartBytes: opts.HelmMaxChartBytes},
			OCI:    artifacts,
		}),
		Clusters:       &clusterinfo.Reader{Clusters: o.Manager, Resolver: resolver, Reports: local.GetAPIReader()},
		Hub:            local.GetClient(),
		Timeout:        opts.SourceTimeout,
		MaxBundleBytes: int(opts.SourceMaxBundleBytes),
	}
	if len(opts.HelmRender.Command) > 0 {
		runner, err := helmrender.New(opts.HelmRender)
		if err != nil {
			return nil, err
		}
		helm.Render = runner.Render
	}
	return helm, nil
}
