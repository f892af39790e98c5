package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/identity"
	"github.com/vidra-operator/vidra/internal/fleet/kubeconfig"
	"github.com/vidra-operator/vidra/internal/fleet/policy"
)

// tokenPlaceholder stands for the token in what a client dry run prints, and what -o
// prints of a real enrollment: the token itself goes to the hub only.
const tokenPlaceholder = "<requested from the member's TokenRequest API at enrollment>"

// memberAccess is the enrolling user's own access to the member: it creates the identity
// and is never written anywhere.
type memberAccess struct {
	rest    *rest.Config
	cluster *clientcmdapi.Cluster // the context's cluster, certificates inline
	server  string                // normalised
}

// loadMemberAccess reads contextName from the user's kubeconfig (path, else $KUBECONFIG
// or ~/.kube/config). Exec plugins are fine here: the credentials stay on this machine.
func loadMemberAccess(path, contextName string) (*memberAccess, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	where := strings.Join(rules.GetLoadingPrecedence(), string(filepath.ListSeparator))
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: contextName})
	raw, err := loader.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("read kubeconfig %s: %w", where, err)
	}
	kctx, ok := raw.Contexts[contextName]
	if !ok {
		return nil, fmt.Errorf("context %q is not in kubeconfig %s (its contexts: %s)",
			contextName, where, strings.Join(slices.Sorted(maps.Keys(raw.Contexts)), ", "))
	}
	if err := clientcmdapi.FlattenConfig(&raw); err != nil {
		return nil, fmt.Errorf("context %q: inline its certificate files: %w", contextName, err)
	}
	cluster, ok := raw.Clusters[kctx.Cluster]
	if !ok {
		return nil, fmt.Errorf("context %q: cluster %q is not in kubeconfig %s", contextName, kctx.Cluster, where)
	}
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("context %q: %w", contextName, err)
	}
	server, err := kubeconfig.NormalizeServer(cluster.Server)
	if err != nil {
		return nil, fmt.Errorf("context %q: server %q: %w", contextName, cluster.Server, err)
	}
	return &memberAccess{rest: cfg, cluster: cluster, server: server}, nil
}

// client is a client of the member with the user's credentials.
func (m *memberAccess) client(scheme *runtime.Scheme, errOut io.Writer) (client.Client, error) {
	cfg := rest.CopyConfig(m.rest)
	cfg.WarningHandler = rest.NewWarningWriter(errOut, rest.WarningWriterOptions{Deduplicate: true})
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("member client for %s: %w", cfg.Host, err)
	}
	return c, nil
}

// resolveClusterKinds finds the resource of each cluster-scoped kind on the member, for
// the RBAC rules: the member's discovery knows its kinds (CRDs included).
func resolveClusterKinds(m *memberAccess, kinds []schema.GroupKind) ([]identity.ClusterKind, error) {
	if len(kinds) == 0 {
		return nil, nil
	}
	httpClient, err := rest.HTTPClientFor(m.rest)
	if err != nil {
		return nil, fmt.Errorf("member client: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(m.rest, httpClient)
	if err != nil {
		return nil, fmt.Errorf("discovery of the member: %w", err)
	}
	out := make([]identity.ClusterKind, 0, len(kinds))
	for _, gk := range kinds {
		mapping, err := mapper.RESTMapping(gk)
		if err != nil {
			return nil, fmt.Errorf("--cluster-kinds %s: the member does not serve it: %w", policy.KindName(gk), err)
		}
		if mapping.Scope.Name() != meta.RESTScopeNameRoot {
			return nil, fmt.Errorf("--cluster-kinds %s: the kind is namespaced; list its namespace in --namespaces instead", policy.KindName(gk))
		}
		out = append(out, identity.ClusterKind{Kind: gk, Resource: mapping.Resource.GroupResource()})
	}
	return out, nil
}

// parseClusterKinds reads --cluster-kinds as the delivery policy reads it.
func parseClusterKinds(v []string) ([]schema.GroupKind, error) {
	if len(v) == 0 {
		return nil, nil
	}
	p, err := policy.Parse(map[string]string{vidrav1alpha1.AllowedClusterKindsAnnotation: strings.Join(v, ",")})
	if err != nil {
		return nil, fmt.Errorf("--cluster-kinds: %w", err)
	}
	return p.AllowedClusterKinds, nil
}

// runIdentity enrolls with a scoped identity: it is created on the member with the user's
// credentials, a token is requested for it, and only that token goes to the hub.
func (o *enrollOptions) runIdentity(ctx context.Context, name string, labels map[string]string, out, errOut io.Writer) error {
	member, err := loadMemberAccess(o.memberKubeconfig, o.memberContext)
	if err != nil {
		return err
	}
	spec, err := o.identitySpec(member)
	if err != nil {
		return err
	}
	sa := spec.ServiceAccount
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	// The Secret is checked as the operator will check it (insecure TLS, plain http).
	check, err := identity.EnrollmentSecret(name, o.secretNamespace, labels, spec, member.cluster, tokenPlaceholder)
	if err != nil {
		return err
	}
	if _, err := kubeconfig.Load(check.Data[vidrav1alpha1.KubeconfigKey], kubeconfig.Policy{AllowInsecureTLS: o.allowInsecureTLS}); err != nil {
		return policyError(o.memberContext, err)
	}
	if o.dryRun == dryRunClient {
		return o.reportIdentity(out, scheme, spec, member.cluster, check, nil, "created (dry run)")
	}

	hub, err := o.hubClient(scheme, member.server, errOut)
	if err != nil {
		return err
	}
	if err := refuseSecondEnrollment(ctx, hub, check); err != nil {
		return err
	}
	if err := o.checkReenrollment(ctx, hub, check, member.server, errOut); err != nil {
		return err
	}
	memberClient, err := member.client(scheme, errOut)
	if err != nil {
		return err
	}
	done, err := identity.Apply(ctx, memberClient, spec, o.dryRun == dryRunServer)
	if err != nil {
		return fmt.Errorf("create the identity on context %q: %w", o.memberContext, err)
	}
	secret := check
	if o.dryRun != dryRunServer {
		token, err := identity.RequestToken(ctx, memberClient, sa, o.tokenTTL)
		if err != nil {
			return err
		}
		if secret, err = identity.EnrollmentSecret(name, o.secretNamespace, labels, spec, member.cluster, token.Value); err != nil {
			return err
		}
		done = append(done, fmt.Sprintf("token of serviceaccount %s requested, expires %s", sa, token.ExpiresAt.UTC().Format(time.RFC3339)))
	}
	o.overwrite = true // checkReenrollment allowed it
	action, err := o.write(ctx, hub, secret)
	if err != nil {
		return err
	}
	return o.reportIdentity(out, scheme, spec, member.cluster, secret, done, action)
}

// identitySpec is the identity on the member that --service-account, --namespaces and
// --cluster-kinds ask for (the kinds resolved by the member's discovery).
func (o *enrollOptions) identitySpec(member *memberAccess) (identity.Spec, error) {
	sa, err := identity.ParseServiceAccount(o.serviceAccount)
	if err != nil {
		return identity.Spec{}, fmt.Errorf("--service-account: %w", err)
	}
	if o.tokenTTL < identity.MinTokenTTL {
		return identity.Spec{}, fmt.Errorf("--token-ttl %s: the API server's minimum is %s", o.tokenTTL, identity.MinTokenTTL)
	}
	kinds, err := parseClusterKinds(o.clusterKinds)
	if err != nil {
		return identity.Spec{}, err
	}
	if len(kinds) > 0 && o.namespaces == nil {
		return identity.Spec{}, fmt.Errorf("--cluster-kinds narrows an identity that --namespaces scopes; without --namespaces it may manage every kind already")
	}
	spec := identity.Spec{ServiceAccount: sa}
	if o.namespaces != nil {
		if len(o.namespaces) == 0 {
			return identity.Spec{}, errors.New("--namespaces needs at least one namespace; leave it out for an identity that may manage any object")
		}
		p, err := policy.Parse(map[string]string{vidrav1alpha1.AllowedNamespacesAnnotation: strings.Join(o.namespaces, ",")})
		if err != nil {
			return identity.Spec{}, fmt.Errorf("--namespaces: %w", err)
		}
		spec.Namespaces = p.AllowedNamespaces
	}
	if spec.ClusterKinds, err = resolveClusterKinds(member, kinds); err != nil {
		return identity.Spec{}, err
	}
	return spec, nil
}

// clusterFlags name the member (a context of the user's kubeconfig) and the hub, for
// enroll and unenroll.
type clusterFlags struct {
	// hub is reached with kubectl's connection flags under other names (--hub-kubeconfig,
	// --hub-context): --kubeconfig and --context name the member here.
	hub              *genericclioptions.ConfigFlags
	memberKubeconfig string
	memberContext    string
	secretNamespace  string
}

func newClusterFlags() clusterFlags {
	return clusterFlags{hub: genericclioptions.NewConfigFlags(false)}
}

func (f *clusterFlags) addClusterFlags(flags *pflag.FlagSet, contextUsage string) {
	flags.StringVar(&f.memberContext, "context", "", contextUsage)
	flags.StringVar(&f.memberKubeconfig, "kubeconfig", "", "The kubeconfig file that holds --context (default: $KUBECONFIG, else ~/.kube/config).")
	flags.StringVar(f.hub.KubeConfig, "hub-kubeconfig", "", "The kubeconfig file of the hub (default: the --kubeconfig file, else $KUBECONFIG, else ~/.kube/config).")
	flags.StringVar(f.hub.Context, "hub-context", "", "The kubeconfig context of the hub (default: the current context of the hub's kubeconfig).")
	flags.StringVar(&f.secretNamespace, "secret-namespace", "vidra-system", "The namespace the operator reads enrollment Secrets from (its --cluster-secret-namespace).")
}

// hubRESTConfig connects to the hub: by default the current context of the member's
// kubeconfig file.
func (f *clusterFlags) hubRESTConfig() (*rest.Config, error) {
	if *f.hub.KubeConfig == "" {
		*f.hub.KubeConfig = f.memberKubeconfig
	}
	cfg, err := f.hub.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("hub connection: %w", err)
	}
	return cfg, nil
}

// hubClient connects to the hub, refusing the member's own API server.
func (o *enrollOptions) hubClient(scheme *runtime.Scheme, memberServer string, errOut io.Writer) (client.Client, error) {
	hubConfig, err := o.hubRESTConfig()
	if err != nil {
		return nil, err
	}
	// Writing a member's Secret on the member itself is the usual slip when the current
	// context is the member's: the operator would never see it.
	if err := o.refuseHubAsMember(hubConfig, memberServer, "point --hub-context (or your current context) at the hub"); err != nil {
		return nil, err
	}
	return hubClientFor(hubConfig, scheme, errOut)
}

// refuseHubAsMember refuses a member context that is the hub's API server, saying what to
// point elsewhere (hint).
func (f *clusterFlags) refuseHubAsMember(hubConfig *rest.Config, memberServer, hint string) error {
	if hubServer, err := kubeconfig.NormalizeServer(hubConfig.Host); err == nil && hubServer == memberServer {
		return fmt.Errorf("the hub and context %q are the same API server (%s): %s", f.memberContext, memberServer, hint)
	}
	return nil
}

// checkReenrollment lets enrolling the same cluster again with the same identity replace
// the Secret (so that enroll is idempotent); any other existing Secret NAME — another
// identity, copied credentials, or another member's server — needs --overwrite.
func (o *enrollOptions) checkReenrollment(ctx context.Context, hub client.Client, secret *corev1.Secret, server string, errOut io.Writer) error {
	var existing corev1.Secret
	err := hub.Get(ctx, client.ObjectKeyFromObject(secret), &existing)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("read secret %s/%s on the hub: %w", secret.Namespace, secret.Name, err)
	}
	before := existing.Annotations[vidrav1alpha1.ServiceAccountAnnotation]
	sameServer := false
	if cfg, err := kubeconfig.Load(existing.Data[vidrav1alpha1.KubeconfigKey], kubeconfig.Policy{AllowExec: true, AllowInsecureTLS: true}); err == nil {
		sameServer = cfg.Server == server
	}
	if !o.overwrite && (!sameServer || before != secret.Annotations[vidrav1alpha1.ServiceAccountAnnotation]) {
		return fmt.Errorf("secret %s/%s already exists on the hub with other credentials or for another server; pass --overwrite to replace them with the identity's", secret.Namespace, secret.Name)
	}
	if before != "" && before != secret.Annotations[vidrav1alpha1.ServiceAccountAnnotation] {
		fmt.Fprintf(errOut, "Warning: the identity %s the Secret named before stays on its member; remove it with: kubectl vidra unenroll %s --context CONTEXT --service-account %s (after this enrollment, the Secret names the new one)\n",
			before, secret.Name, before)
	}
	return nil
}

// reportIdentity prints what was created, or with -o the objects: the identity's and the
// Secret (whose token a client dry run leaves out).
func (o *enrollOptions) reportIdentity(out io.Writer, scheme *runtime.Scheme, spec identity.Spec, cluster *clientcmdapi.Cluster, secret *corev1.Secret, done []string, action string) error {
	if !o.output.table() {
		// The token goes to the hub only, never to stdout.
		if shown, err := identity.EnrollmentSecret(secret.Name, secret.Namespace, secret.Labels, spec, cluster, tokenPlaceholder); err == nil {
			shown.Annotations = secret.Annotations
			secret = shown
		}
		objs := make([]runtime.Object, 0, 8)
		for _, ns := range spec.NeededNamespaces() {
			objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		}
		for _, obj := range spec.Objects() {
			objs = append(objs, obj)
		}
		return o.output.printList(out, scheme, append(objs, secret)...)
	}
	where := "on the member"
	for _, line := range done {
		fmt.Fprintf(out, "%s (%s)\n", line, where)
	}
	if o.dryRun == dryRunClient {
		for _, ns := range spec.NeededNamespaces() {
			fmt.Fprintf(out, "namespace/%s created if missing (dry run) (%s)\n", ns, where)
		}
		for _, obj := range spec.Objects() {
			fmt.Fprintf(out, "%s/%s configured (dry run) (%s)\n", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), where)
		}
	}
	scope := "may manage any object"
	if spec.Scoped() {
		scope = "may manage objects in namespaces " + strings.Join(spec.Namespaces, ", ")
		if len(spec.ClusterKinds) > 0 {
			scope += " and cluster-scoped " + strings.Join(spec.ClusterKindNames(), ", ")
		}
	}
	fmt.Fprintf(out, "serviceaccount %s %s; its token expires after %s and the operator renews it\n", spec.ServiceAccount, scope, o.tokenTTL)
	if o.dryRun != dryRunNone {
		fmt.Fprintf(out, "secret/%s %s (on the hub)\n", secret.Name, action)
		return nil
	}
	fmt.Fprintf(out, "secret/%s %s (on the hub); watch it with: kubectl get vidraclusters %s\n", secret.Name, action, secret.Name)
	return nil
}
