package operator

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/hooks"
	"github.com/vidra-operator/vidra/controllers/infrahubsync"
	"github.com/vidra-operator/vidra/controllers/syncs"
	"github.com/vidra-operator/vidra/controllers/vidraresource"
	"github.com/vidra-operator/vidra/controllers/vmrollout"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/engine/history"
	"github.com/vidra-operator/vidra/internal/fleet/destination"
	"github.com/vidra-operator/vidra/internal/fleet/hublink"
	"github.com/vidra-operator/vidra/internal/fleet/policy"
	"github.com/vidra-operator/vidra/internal/source/infrahub"
)

// eventSource names the operator's controllers in the Events they record.
const eventSource = "vidra"

// setupControllers registers Vidra's controllers, their metrics and the content store
// with the manager.
func (o *Operator) setupControllers(opts Options) error {
	local := o.Manager.GetLocalManager()
	metrics, err := registerMetrics(opts.Metrics, local.GetClient(), opts.agent != nil, opts.Logger.WithName("fleet-metrics"))
	if err != nil {
		return err
	}
	if err := o.setupAlerts(opts); err != nil {
		return err
	}
	if o.Content, err = setupContentStore(local, opts); err != nil {
		return err
	}
	if o.Provider != nil {
		if err := addPullContentCollector(local, opts); err != nil {
			return err
		}
	}
	if o.guards, err = admissionGuards(local, opts); err != nil {
		return err
	}
	if err := o.setupVidraResources(metrics.resources, opts); err != nil {
		return err
	}
	if err := o.setupVMRollout(metrics.vms, opts); err != nil {
		return err
	}
	if opts.agent != nil {
		// An agent applies what its hub publishes; the syncs run on the hub.
		return nil
	}
	if err := o.setupSourceSyncs(metrics.sources, metrics.previews, opts); err != nil {
		return err
	}
	if err := o.setupInfrahubSync(metrics.syncs, metrics.previews, opts); err != nil {
		return err
	}
	if err := o.setupInventory(opts); err != nil {
		return err
	}
	return o.setupReceiver(metrics.hooks, opts)
}

// driftScope has drift watches look on each cluster only where its cache may: an
// identity narrowed to namespaces may not list the others.
func (o *Operator) driftScope(opts Options) vidraresource.NamespaceScope {
	var local []string
	if opts.agent != nil {
		local = opts.agent.Namespaces
	}
	return func(name multicluster.ClusterName, cl cluster.Cluster) ([]string, bool) {
		switch {
		case name == destination.LocalCluster:
			return local, true
		case o.Provider == nil:
			return nil, true
		}
		return o.Provider.WatchedNamespaces(name, cl)
	}
}

// revisionHistory keeps the VidraResources' revisions in namespace, their content in
// store, read through an index every replica watches (each records the revisions of its
// own clusters). The leader moves the manifests earlier versions kept in revisions into
// store.
func revisionHistory(local manager.Manager, namespace string, store *content.Store, log logr.Logger) (*history.History, error) {
	mc, err := metadata.NewForConfig(local.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("revision index: %w", err)
	}
	index := history.NewIndex(mc, namespace)
	if err := local.Add(everyReplica(index.Run)); err != nil {
		return nil, fmt.Errorf("add revision index: %w", err)
	}
	h := &history.History{Client: local.GetClient(), Reader: local.GetAPIReader(), Namespace: namespace, Index: index}
	if store == nil {
		return h, nil
	}
	h.Store = store
	migration := &history.Migration{History: h, Retry: 10 * time.Second, Interval: 10 * time.Minute, Log: log}
	if err := local.Add(migration); err != nil {
		return nil, fmt.Errorf("add revision migration: %w", err)
	}
	return h, nil
}

// setupVidraResources registers the VidraResource controller and its drift watches.
func (o *Operator) setupVidraResources(metrics *vidraresource.Metrics, opts Options) error {
	local := o.Manager.GetLocalManager()
	localSA, err := ParseServiceAccount(opts.LocalServiceAccount)
	if err != nil {
		return fmt.Errorf("local service account: %w", err)
	}
	revisions, err := revisionHistory(local, opts.ContentNamespace, o.Content, opts.Logger.WithName("history"))
	if err != nil {
		return err
	}
	o.Watches = vidraresource.NewDriftWatches(opts.Logger.WithName("drift"), o.HubID)
	o.Watches.Scope = o.driftScope(opts)
	r := &vidraresource.Reconciler{
		Content:             o.Content,
		Metrics:             metrics,
		Hub:                 local.GetClient(),
		HubReader:           local.GetAPIReader(),
		Manager:             o.Manager,
		Resolver:            destination.Resolver{DisableLocalCluster: opts.DisableLocalCluster},
		HubID:               o.HubID,
		ResyncInterval:      opts.ResyncInterval,
		ReconcileOnEvents:   opts.ReconcileOnEvents,
		RequestTimeout:      opts.RequestTimeout,
		Recorder:            o.events,
		Watches:             o.Watches,
		History:             revisions,
		HubGuard:            policy.HubGuard{Namespaces: opts.protectedNamespaces()},
		LocalServiceAccount: localSA,
	}
	if o.Provider != nil {
		r.Resolver.Fleet, r.Policies = o.Provider, o.Provider
		r.PerClusterReconciles = opts.MaxConcurrentReconcilesPerCluster
	}
	r.Guards = o.guards
	r.Selector = ownSelector(opts.agent)
	o.resources = r
	if opts.agent != nil {
		r.LocalPolicy = opts.agent.Policy
	}
	if o.Shard != nil {
		r.Shard = o.Shard
		o.Shard.OnGained(r.ClusterGained)
		o.Shard.OnLost(r.ClusterLost)
		// The leader reconciles what no fence covers: look at everything once elected.
		if err := local.Add(manager.RunnableFunc(func(ctx context.Context) error {
			r.RequeueAll(ctx)
			return nil
		})); err != nil {
			return fmt.Errorf("add requeue on election: %w", err)
		}
	}
	return r.SetupWithManager(opts.MaxConcurrentReconciles)
}

// setupContentStore returns the store of large bundles and runs its collector on the
// leader.
func setupContentStore(mgr manager.Manager, opts Options) (*content.Store, error) {
	store := &content.Store{
		Client:    mgr.GetClient(),
		Reader:    mgr.GetAPIReader(),
		Namespace: opts.ContentNamespace,
		Grace:     opts.ContentGracePeriod,
	}
	inUse := content.NamedByAny(content.NamedByVidraResources(mgr.GetClient()), content.NamedBySyncs(mgr.GetClient()),
		history.Digests(mgr.GetAPIReader(), opts.ContentNamespace))
	if opts.agent != nil {
		// An agent's content is named by its copies and their history; syncs run on the hub.
		inUse = content.NamedByAny(content.NamedByVidraResources(mgr.GetClient()), history.Digests(mgr.GetAPIReader(), opts.ContentNamespace))
	}
	collector := &content.Collector{
		Store:    store,
		InUse:    inUse,
		Interval: max(opts.ContentGracePeriod/4, time.Second),
		Log:      opts.Logger.WithName("content"),
	}
	if err := mgr.Add(collector); err != nil {
		return nil, fmt.Errorf("add content collector: %w", err)
	}
	return store, nil
}

// infrahubLimits are the bounds of every sync's reading of Infrahub, with the one memory
// budget they all share (none when 0, as for every bound).
func infrahubLimits(opts Options) infrahub.Limits {
	limits := infrahub.Limits{
		MaxArtifacts: opts.InfrahubSyncMaxArtifacts,
		MaxBytes:     opts.InfrahubSyncMaxBytes,
		Timeout:      opts.InfrahubSyncTimeout,
	}
	if opts.InfrahubMemoryBudget > 0 {
		limits.Budget = infrahub.NewBudget(opts.InfrahubMemoryBudget)
	}
	return limits
}

// setupInfrahubSync registers the InfrahubSync controller.
func (o *Operator) setupInfrahubSync(metrics *infrahubsync.Metrics, previews *syncs.PreviewMetrics, opts Options) error {
	local := o.Manager.GetLocalManager()
	r := &syncs.Reconciler{
		Kind: &infrahubsync.Kind{
			Hub:         local.GetClient(),
			HubReader:   local.GetAPIReader(),
			Namespace:   opts.InfrahubSecretNamespace,
			HTTPTimeout: opts.InfrahubTimeout,
			Limits:      infrahubLimits(opts),
			Recorder:    o.events,
			Metrics:     metrics,
		},
		Hub:       local.GetClient(),
		HubReader: local.GetAPIReader(),
		// One trickling Infrahub holds no more than its share of the workers.
		PerSourceSyncs:    opts.MaxConcurrentSyncsPerSource,
		PerRequesterSyncs: opts.MaxConcurrentSyncsPerRequester,
		Guards:            o.guards,
		Content:           o.Content,
		Recorder:          o.events,
		Metrics:           metrics.Syncs(),
		Previews: &syncs.Previews{DryRun: o.resources, Clusters: opts.PreviewClusters, Metrics: previews,
			Log: opts.Logger.WithName("previews").WithValues("kind", "InfrahubSync")},
	}
	return r.SetupWithManager(local, opts.MaxConcurrentSyncs)
}

// setupReceiver registers, when a key is configured, the receiver of Infrahub's webhooks
// and Git hosts' pushes.
func (o *Operator) setupReceiver(metrics *hooks.Metrics, opts Options) error {
	if opts.WebhookBindAddress == "0" || opts.WebhookSecret == "" {
		opts.Logger.Info("webhooks and pushes are not received: set --infrahub-webhook-secret (and --webhook-bind-address) to receive them")
		return nil
	}
	local := o.Manager.GetLocalManager()
	receiver := &hooks.Receiver{
		Addr:      opts.WebhookBindAddress,
		Hub:       local.GetClient(),
		Secrets:   local.GetAPIReader(),
		KeySecret: types.NamespacedName{Namespace: opts.InfrahubSecretNamespace, Name: opts.WebhookSecret},
		Log:       opts.Logger.WithName("webhook"),
		Metrics:   metrics,
	}
	if err := local.Add(receiver); err != nil {
		return fmt.Errorf("add webhook receiver: %w", err)
	}
	return nil
}

// setupVMRollout registers the VirtualMachine rollout controller.
func (o *Operator) setupVMRollout(metrics *vmrollout.Metrics, opts Options) error {
	local := o.Manager.GetLocalManager()
	r := &vmrollout.Reconciler{
		Hub:                 local.GetClient(),
		Manager:             o.Manager,
		HubID:               o.HubID,
		DisableLocalCluster: opts.DisableLocalCluster,
		Recorder:            o.events,
		Metrics:             metrics,
	}
	if o.Shard != nil {
		r.Shard = o.Shard
	}
	r.Selector = ownSelector(opts.agent)
	return r.SetupWithManager(o.Manager, opts.MaxConcurrentReconciles)
}

// resolveHubID returns the hub ID: the one given, or the first 8 characters of the UID of
// the hub's kube-system namespace, which is stable for the life of the cluster.
func resolveHubID(ctx context.Context, hub client.Reader, given string) (string, error) {
	if given != "" {
		return given, nil
	}
	ns := &corev1.Namespace{}
	if err := hub.Get(ctx, client.ObjectKey{Name: "kube-system"}, ns); err != nil {
		return "", fmt.Errorf("derive the hub ID from namespace kube-system (or set --hub-id): %w", err)
	}
	return string(ns.UID)[:8], nil
}

// ownSelector selects the VidraResources this operator looks after: an agent's, its
// copies of its hub's bundles; any other's, all but an agent's copies, which are applied
// only by the agent, as the identity it was enrolled with.
func ownSelector(agent *hublink.Link) labels.Selector {
	if agent != nil {
		return labels.SelectorFromSet(labels.Set{vidrav1alpha1.PulledFromLabel: agent.Cluster})
	}
	notCopies, err := labels.NewRequirement(vidrav1alpha1.PulledFromLabel, selection.DoesNotExist, nil)
	if err != nil {
		panic(err) // a constant, valid key
	}
	return labels.NewSelector().Add(*notCopies)
}
