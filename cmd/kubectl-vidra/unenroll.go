package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/identity"
)

type unenrollOptions struct {
	clusterFlags
	serviceAccount string
	dryRun         string
	agentNamespace string
	hubOnly        bool
}

func newUnenrollCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &unenrollOptions{clusterFlags: newClusterFlags()}
	cmd := &cobra.Command{
		Use:   "unenroll NAME --context MEMBER_CONTEXT",
		Short: "Unenroll a cluster: remove its identity on the member, then its Secret on the hub",
		Long: `Unenroll cluster NAME: the identity kubectl vidra enroll created on the member (its
ServiceAccount first, so its tokens stop working at once, then its RBAC, and its namespace
if enroll created it) is removed with your credentials of --context, then the Secret NAME
on the hub. The operator disengages the cluster when the Secret goes. What was delivered
to the cluster stays there.

A Secret that holds copied credentials (enrolled with --copy-credentials or by hand) has
no identity to remove: only the Secret is deleted, and those credentials stay valid on
the member until you revoke them.

A pull cluster (enrolled with --pull: its Secret says so, or the hub still holds its
namespace vidra-pull-NAME) is removed from both sides, in the order that leaves its agent
nothing to act on: the agent's ServiceAccount on the hub first (its tokens stop working at
once); then on the member the agent's Deployment and RBAC bindings, its copies of the
bundles (what they delivered stays), its roles, Secret vidra-agent-hub and ServiceAccount
in --agent-namespace, the identity it applied as, and Vidra's CRDs unless the member has
VidraResources of its own; then on the hub the Secret NAME and the cluster's namespace,
with its bundles. --context is required (--hub-only, for a member gone for good, removes
the hub's side alone), and --dry-run is refused. An agent run by the
chart (mode: agent) loses its rights too, but its Deployment is Helm's: helm uninstall it.

Unenrolling what is already gone succeeds, so it can be run again after a failure.`,
		Example: `  # Remove cluster edge-1 from the fleet.
  kubectl vidra unenroll edge-1 --context edge-1-admin

  # Remove pull cluster edge-5 from both sides: its agent's rights first, then the rest.
  kubectl vidra unenroll edge-5 --context edge-5-admin --hub-context hub`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), args[0], streams.Out, streams.ErrOut)
		},
	}
	flags := cmd.Flags()
	o.addClusterFlags(flags, "The kubeconfig context of the cluster; needed to remove an identity.")
	flags.StringVar(&o.serviceAccount, "service-account", "", "The identity to remove when the Secret is gone already (default: the one the Secret names, else vidra-system/vidra).")
	flags.StringVar(&o.agentNamespace, "agent-namespace", "vidra-system", "A pull cluster's agent namespace on the member.")
	flags.BoolVar(&o.hubOnly, "hub-only", false, "A pull cluster whose member is gone: remove only the hub's side (its agent's identity first); what enrollment made on the member stays there.")
	flags.StringVar(&o.dryRun, "dry-run", dryRunNone, `"server" has both API servers check the deletions without making them.`)
	return cmd
}

// run removes cluster name: a pull cluster from both sides; else the identity its Secret
// names (or --service-account) on the member first, so that its tokens stop working, then
// the Secret on the hub.
func (o *unenrollOptions) run(ctx context.Context, name string, out, errOut io.Writer) error {
	if o.dryRun != dryRunNone && o.dryRun != dryRunServer {
		return fmt.Errorf(`--dry-run must be "none" or "server", not %q`, o.dryRun)
	}
	hub, err := o.connectHub(errOut)
	if err != nil {
		return err
	}
	key := types.NamespacedName{Namespace: o.secretNamespace, Name: name}
	secret, err := enrollmentSecretOf(ctx, hub.client, key)
	if err != nil {
		return err
	}
	if pulled, err := isPull(ctx, hub.client, secret, name); err != nil {
		return fmt.Errorf("look for cluster %s's namespace on the hub: %w", name, err)
	} else if pulled {
		return o.unenrollPull(ctx, hub.client, secret, name, out, errOut)
	}
	if sa := o.identityToRemove(secret, key, errOut); sa != "" {
		if o.memberContext == "" {
			return fmt.Errorf("secret %s names the identity %s on the member: pass --context with access to the member to remove it (it is removed before the Secret, so that its tokens stop working)", key, sa)
		}
		if err := o.removeIdentity(ctx, hub, sa, out, errOut); err != nil {
			return err
		}
	}
	if secret == nil {
		fmt.Fprintf(out, "secret/%s not found (on the hub)\n", name)
		return nil
	}
	return o.deleteSecret(ctx, hub.client, secret, out)
}

// hubAccess is the hub as the plugin reaches it.
type hubAccess struct {
	config *rest.Config
	scheme *runtime.Scheme
	client client.Client
}

func (f *clusterFlags) connectHub(errOut io.Writer) (hubAccess, error) {
	scheme, err := newScheme()
	if err != nil {
		return hubAccess{}, err
	}
	config, err := f.hubRESTConfig()
	if err != nil {
		return hubAccess{}, err
	}
	c, err := hubClientFor(config, scheme, errOut)
	if err != nil {
		return hubAccess{}, err
	}
	return hubAccess{config: config, scheme: scheme, client: c}, nil
}

// enrollmentSecretOf is the Secret that enrolls the cluster; nil when it is gone already.
func enrollmentSecretOf(ctx context.Context, hub client.Client, key types.NamespacedName) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	if err := hub.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read secret %s on the hub: %w", key, err)
	}
	return secret, nil
}

// identityToRemove is the identity on the member to remove, as NAMESPACE/NAME:
// --service-account, else the one the Secret names, else (the Secret gone, a member
// given) enroll's default. None for a Secret of copied credentials, which stay valid on
// the member: the user is told so.
func (o *unenrollOptions) identityToRemove(secret *corev1.Secret, key types.NamespacedName, errOut io.Writer) string {
	if o.serviceAccount != "" {
		return o.serviceAccount
	}
	if secret == nil {
		if o.memberContext == "" {
			return ""
		}
		sa := identity.DefaultServiceAccount.String()
		fmt.Fprintf(errOut, "secret %s is not on the hub; removing the identity %s from the member (--service-account names another)\n", key, sa)
		return sa
	}
	sa, ok := secret.Annotations[vidrav1alpha1.ServiceAccountAnnotation]
	if !ok {
		fmt.Fprintf(errOut, "Warning: secret %s holds copied credentials, not an identity of enroll: they stay valid on the member until you revoke them.\n", key)
	}
	return sa
}

// removeIdentity removes the identity from the member --context names, which must not be
// the hub: that would remove an identity of that name from the hub.
func (o *unenrollOptions) removeIdentity(ctx context.Context, hub hubAccess, name string, out, errOut io.Writer) error {
	sa, err := identity.ParseServiceAccount(name)
	if err != nil {
		return err
	}
	member, err := loadMemberAccess(o.memberKubeconfig, o.memberContext)
	if err != nil {
		return err
	}
	if err := o.refuseHubAsMember(hub.config, member.server, "point --context at the member"); err != nil {
		return err
	}
	memberClient, err := member.client(hub.scheme, errOut)
	if err != nil {
		return err
	}
	done, err := identity.Remove(ctx, memberClient, sa, o.dryRun == dryRunServer)
	for _, line := range done {
		fmt.Fprintf(out, "%s (on the member)\n", line)
	}
	if err != nil {
		return fmt.Errorf("remove the identity %s on context %q: %w", sa, o.memberContext, err)
	}
	return nil
}

func (o *unenrollOptions) deleteSecret(ctx context.Context, hub client.Client, secret *corev1.Secret, out io.Writer) error {
	var opts []client.DeleteOption
	suffix := ""
	if o.dryRun == dryRunServer {
		opts, suffix = []client.DeleteOption{client.DryRunAll}, " (server dry run)"
	}
	if err := client.IgnoreNotFound(hub.Delete(ctx, secret, opts...)); err != nil {
		return fmt.Errorf("delete secret %s/%s on the hub: %w", secret.Namespace, secret.Name, err)
	}
	fmt.Fprintf(out, "secret/%s deleted%s (on the hub)\n", secret.Name, suffix)
	return nil
}
