package operator

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/pullagent"
	"github.com/vidra-operator/vidra/internal/engine/apply"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/fleet/hublink"
	"github.com/vidra-operator/vidra/internal/runtime/patientdial"
	operatorscheme "github.com/vidra-operator/vidra/internal/runtime/scheme"
)

// NewAgent builds the agent of a pull cluster against its own cluster, member: the
// operator of that cluster alone (as in standalone mode), which applies copies of the
// bundles the hub publishes for the cluster and repairs their drift with or without the
// hub, plus its link to the hub, found in the Secret vidra-agent-hub of AgentNamespace.
// It waits for the hub only the first time, to learn in whose name it owns objects.
func NewAgent(ctx context.Context, member *rest.Config, opts Options) (_ *Operator, err error) {
	scheme, err := operatorscheme.New()
	if err != nil {
		return nil, err
	}
	log := opts.Logger.WithName("agent")
	h, err := linkToHub(ctx, member, opts, scheme, log)
	if err != nil {
		return nil, err
	}
	opts = agentOptions(opts, h.link)
	op, err := New(ctx, member, opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			op.removeTemporarySourceCache()
		}
	}()
	if err := addHubLink(op, member, h, opts, log); err != nil {
		return nil, err
	}
	op.about = append(op.about, "mode", "agent", "cluster", h.link.Cluster, "hubNamespace", h.link.Namespace)
	return op, nil
}

// agentHub is an agent's hub: its link, and a client and configuration for it.
type agentHub struct {
	link   *hublink.Link
	config *rest.Config
	mapper meta.RESTMapper
	client client.Client
	scheme *runtime.Scheme
}

// linkToHub reads the agent's link in the member's Secret vidra-agent-hub and learns from
// the hub in whose name the agent owns objects.
func linkToHub(ctx context.Context, member *rest.Config, opts Options, scheme *runtime.Scheme, log logr.Logger) (agentHub, error) {
	direct, err := client.New(member, client.Options{Scheme: scheme})
	if err != nil {
		return agentHub{}, fmt.Errorf("client for the member: %w", err)
	}
	link, err := hublink.Load(ctx, direct, types.NamespacedName{Namespace: opts.AgentNamespace, Name: vidrav1alpha1.AgentSecretName})
	if err != nil {
		return agentHub{}, err
	}
	hubCfg := link.Config()
	// An agent makes a handful of requests to its hub: a watch, a heartbeat, reports.
	hubCfg.QPS, hubCfg.Burst = 20, 40
	if opts.WrapHubTransport != nil {
		hubCfg.Wrap(opts.WrapHubTransport)
	}
	hubMapper := agentHubMapper()
	hub, err := client.New(hubCfg, client.Options{Scheme: scheme, Mapper: hubMapper})
	if err != nil {
		return agentHub{}, fmt.Errorf("client for the hub: %w", err)
	}
	if err := link.ResolveHubID(ctx, hub, log); err != nil {
		return agentHub{}, err
	}
	return agentHub{link: link, config: hubCfg, mapper: hubMapper, client: hub, scheme: scheme}, nil
}

// agentOptions are the options of the member's own operator under an agent: no cluster
// provider and no sharding, its objects owned in the hub's name, applied as the identity
// the link names, its content and Leases in the agent's namespace.
func agentOptions(opts Options, link *hublink.Link) Options {
	if opts.AgentTokenRenewalPoint <= 0 || opts.AgentTokenRenewalPoint >= 1 {
		opts.AgentTokenRenewalPoint = hublink.DefaultRenewalPoint // renewing at each beat would be no choice
	}
	opts.agent = link
	opts.ClusterProvider = ProviderNone
	opts.Sharding = false
	opts.HubID = link.HubID
	opts.LocalServiceAccount = link.Delivery.String()
	opts.ContentNamespace = opts.AgentNamespace
	opts.LeaderElectionNamespace = opts.AgentNamespace
	return opts
}

// addHubLink adds to the operator, run by its leader, the copy of the hub's bundles and
// the heartbeat that renews the agent's token.
func addHubLink(op *Operator, member *rest.Config, h agentHub, opts Options, log logr.Logger) error {
	// Its watch waits at the dial for a hub that restarts (patientdial).
	patient, err := patientdial.HTTPClientFor(h.config)
	if err != nil {
		return err
	}
	hubCache, err := cache.New(h.config, cache.Options{Scheme: h.scheme, Mapper: h.mapper, HTTPClient: patient,
		DefaultNamespaces: map[string]cache.Config{h.link.Namespace: {}}, DefaultTransform: apply.TrimCached})
	if err != nil {
		return fmt.Errorf("cache of the hub's bundles: %w", err)
	}
	local := op.Manager.GetLocalManager()
	runner := &pullagent.Runner{
		Reconciler: &pullagent.Reconciler{
			Cluster: h.link.Cluster, Namespace: h.link.Namespace, Bundles: hubCache, Hub: h.client,
			HubContent: &content.Store{Client: h.client, Reader: h.client, Namespace: h.link.Namespace, CacheBytes: 1},
			Content:    op.Content,
			Member:     local.GetClient(),
			Recorder:   local.GetEventRecorder("vidra-agent"),
		},
		HubCache:                hubCache,
		MemberCache:             local.GetCache(),
		MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
		Log:                     log.WithName("bundles"),
	}
	memberDiscovery, err := discovery.NewDiscoveryClientForConfig(member)
	if err != nil {
		return fmt.Errorf("discovery of the member: %w", err)
	}
	heartbeat := &hublink.Heartbeat{Link: h.link, Hub: h.client, Interval: opts.AgentHeartbeat, Version: opts.Version, KubernetesVersion: memberVersion(memberDiscovery),
		Member:       memberDiscovery,
		RenewalPoint: opts.AgentTokenRenewalPoint, Log: log.WithName("heartbeat")}
	for _, r := range []interface {
		Start(context.Context) error
	}{runner, heartbeat} {
		if err := local.Add(leaderRunnable(r.Start)); err != nil {
			return fmt.Errorf("add the agent's link to the hub: %w", err)
		}
	}
	return nil
}

// agentHubMapper maps the few kinds an agent uses on its hub without asking the hub:
// discovery would cost requests, and fail while the hub is down.
func agentHubMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(vidrav1alpha1.GroupVersion.WithKind("VidraBundle"), meta.RESTScopeNamespace)
	m.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	m.Add(corev1.SchemeGroupVersion.WithKind("Secret"), meta.RESTScopeNamespace)
	m.Add(corev1.SchemeGroupVersion.WithKind("ServiceAccount"), meta.RESTScopeNamespace)
	m.Add(coordinationv1.SchemeGroupVersion.WithKind("Lease"), meta.RESTScopeNamespace)
	return m
}

// leaderRunnable runs on the agent's leader only.
type leaderRunnable func(context.Context) error

func (r leaderRunnable) Start(ctx context.Context) error { return r(ctx) }
func (r leaderRunnable) NeedLeaderElection() bool        { return true }

// memberVersion is the member's Kubernetes version, which the agent reports to the hub;
// empty when the member does not say.
func memberVersion(dc discovery.DiscoveryInterface) string {
	v, err := dc.ServerVersion()
	if err != nil {
		return ""
	}
	return v.GitVersion
}
