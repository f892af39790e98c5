package testfleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sync/errgroup"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kubevirtv1 "kubevirt.io/api/core/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Options shape a fleet.
type Options struct {
	// Members is how many member clusters to start beside the hub.
	Members int
	// HubCRDDirectories are installed on the hub; empty means Vidra's generated CRDs.
	HubCRDDirectories []string
	// MemberCRDDirectories are installed on every member (for example KubeVirt's CRDs).
	MemberCRDDirectories []string
	// ControllerManager runs kube-controller-manager's garbage-collector, namespace,
	// ClusterRole aggregation and ServiceAccount token controllers beside every API
	// server, for tests that need ownerReference cascades, namespace deletion, aggregated
	// roles (view, edit, admin) or the tokens of service-account-token Secrets.
	ControllerManager bool
	// HubControllers, when set, are the controllers run beside the hub's API server
	// instead (ClusterRoleAggregation alone, say, for tests of roles).
	HubControllers []string
	// Scheme for the clients; empty means client-go's scheme plus apiextensions and Vidra.
	Scheme *runtime.Scheme
}

// Fleet is a hub and its members, each a real control plane.
type Fleet struct {
	Hub     *Cluster
	Members []*Cluster
}

// Start starts the hub and the members side by side and returns when every API server is
// healthy and its CRDs are established. On error, whatever was started is stopped.
func Start(ctx context.Context, opts Options) (*Fleet, error) {
	assets, err := BinaryAssetsDirectory()
	if err != nil {
		return nil, err
	}
	reapOrphans(assets)
	scheme := opts.Scheme
	if scheme == nil {
		if scheme, err = NewScheme(); err != nil {
			return nil, err
		}
	}
	hubCRDs := opts.HubCRDDirectories
	if len(hubCRDs) == 0 {
		dir, err := CRDDirectory()
		if err != nil {
			return nil, err
		}
		hubCRDs = []string{dir}
	}

	var controllers []string
	if opts.ControllerManager {
		controllers = []string{GarbageCollector, NamespaceController, ClusterRoleAggregation, ServiceAccountToken}
	}
	hubControllers := controllers
	if len(opts.HubControllers) > 0 {
		hubControllers = opts.HubControllers
	}
	specs := []clusterSpec{{name: "hub", crdDirectories: hubCRDs, controllers: hubControllers}}
	for i := range opts.Members {
		specs = append(specs, clusterSpec{name: fmt.Sprintf("member-%d", i+1), crdDirectories: opts.MemberCRDDirectories, controllers: controllers})
	}
	clusters := make([]*Cluster, len(specs))
	group, groupCtx := errgroup.WithContext(ctx)
	for i, spec := range specs {
		spec.assets = assets
		spec.scheme = scheme
		group.Go(func() error {
			c, err := startCluster(groupCtx, spec)
			clusters[i] = c
			return err
		})
	}
	err = group.Wait()
	fleet := &Fleet{Hub: clusters[0], Members: clusters[1:]}
	if err != nil {
		return nil, errors.Join(err, fleet.Stop())
	}
	return fleet, nil
}

// Clusters returns the hub followed by the members.
func (f *Fleet) Clusters() []*Cluster {
	return append([]*Cluster{f.Hub}, f.Members...)
}

// Stop stops every control plane of the fleet; clusters that never started are skipped.
func (f *Fleet) Stop() error {
	var errs []error
	for _, c := range f.Clusters() {
		if c != nil {
			errs = append(errs, c.Stop())
		}
	}
	return errors.Join(errs...)
}

// NewScheme returns client-go's scheme with apiextensions, Vidra's API and KubeVirt's core
// types added.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		apiextensionsv1.AddToScheme,
		vidrav1alpha1.AddToScheme,
		kubevirtv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	return scheme, nil
}

// Main runs a test package's tests on a fleet started for them: use it from TestMain as
// os.Exit(testfleet.Main(m, opts, func(f *Fleet) { ... })), where the function keeps the
// clusters the tests need. The fleet is stopped when the tests end.
func Main(m interface{ Run() int }, opts Options, keep func(*Fleet)) int {
	fleet, err := Start(context.Background(), opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start fleet:", err)
		return 1
	}
	defer func() {
		if err := fleet.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop fleet:", err)
		}
	}()
	keep(fleet)
	return m.Run()
}

// WriteUserKubeconfig writes into dir the kubeconfig a fleet admin has: one context per
// cluster, named after it (hub, member-1, …), the hub current. It returns its path.
func (f *Fleet) WriteUserKubeconfig(dir string) (string, error) {
	merged := clientcmdapi.NewConfig()
	for _, c := range f.Clusters() {
		cfg, err := clientcmd.Load(c.Kubeconfig)
		if err != nil {
			return "", fmt.Errorf("kubeconfig of %s: %w", c.Name, err)
		}
		current := cfg.Contexts[cfg.CurrentContext]
		merged.Clusters[c.Name] = cfg.Clusters[current.Cluster]
		merged.AuthInfos[c.Name] = cfg.AuthInfos[current.AuthInfo]
		merged.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: c.Name}
	}
	merged.CurrentContext = f.Hub.Name
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*merged, path); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}
