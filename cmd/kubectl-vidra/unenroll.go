package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/identity"
)

type unenrollOptions struct {
	clusterFlags
	serviceAccount string
	dryRun         string
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

Unenrolling what is already gone succeeds, so it can be run again after a failure.`,
		Example: `  # Remove cluster edge-1 from the fleet.
  kubectl vidra unenroll edge-1 --context edge-1-admin`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), args[0], streams.Out, streams.ErrOut)
		},
	}
	flags := cmd.Flags()
	o.addClusterFlags(flags, "The kubeconfig context of the cluster; needed to remove an identity.")
	flags.StringVar(&o.serviceAccount, "service-account", "", "The identity to remove when the Secret is gone already (default: the one the Secret names, else vidra-system/vidra).")
	flags.StringVar(&o.dryRun, "dry-run", dryRunNone, `"server" has both API servers check the deletions without making them.`)
	return cmd
}

func (o *unenrollOptions) run(ctx context.Context, name string, out, errOut io.Writer) error {
	if o.dryRun != dryRunNone && o.dryRun != dryRunServer {
		return fmt.Errorf(`--dry-run must be "none" or "server", not %q`, o.dryRun)
	}
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	hubConfig, err := o.hubRESTConfig()
	if err != nil {
		return err
	}
	hub, err := hubClientFor(hubConfig, scheme, errOut)
	if err != nil {
		return err
	}
	key := types.NamespacedName{Namespace: o.secretNamespace, Name: name}
	secret := &corev1.Secret{}
	if err := hub.Get(ctx, key, secret); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("read secret %s on the hub: %w", key, err)
		}
		secret = nil
	}

	saName := o.serviceAccount
	if secret != nil {
		if v, ok := secret.Annotations[vidrav1alpha1.ServiceAccountAnnotation]; ok && saName == "" {
			saName = v
		} else if !ok && saName == "" {
			fmt.Fprintf(errOut, "Warning: secret %s holds copied credentials, not an identity of enroll: they stay valid on the member until you revoke them.\n", key)
		}
	} else if o.memberContext != "" && saName == "" {
		saName = identity.DefaultServiceAccount.String()
		fmt.Fprintf(errOut, "secret %s is not on the hub; removing the identity %s from the member (--service-account names another)\n", key, saName)
	}

	dry := o.dryRun == dryRunServer
	if saName != "" {
		if o.memberContext == "" {
			return fmt.Errorf("secret %s names the identity %s on the member: pass --context with access to the member to remove it (it is removed before the Secret, so that its tokens stop working)", key, saName)
		}
		sa, err := identity.ParseServiceAccount(saName)
		if err != nil {
			return err
		}
		member, err := loadMemberAccess(o.memberKubeconfig, o.memberContext)
		if err != nil {
			return err
		}
		// A --context that is the hub would remove an identity of that name from the hub.
		if err := o.refuseHubAsMember(hubConfig, member.server, "point --context at the member"); err != nil {
			return err
		}
		memberClient, err := member.client(scheme, errOut)
		if err != nil {
			return err
		}
		done, err := identity.Remove(ctx, memberClient, sa, dry)
		for _, line := range done {
			fmt.Fprintf(out, "%s (on the member)\n", line)
		}
		if err != nil {
			return fmt.Errorf("remove the identity %s on context %q: %w", sa, o.memberContext, err)
		}
	}
	if secret == nil {
		fmt.Fprintf(out, "secret/%s not found (on the hub)\n", name)
		return nil
	}
	var opts []client.DeleteOption
	suffix := ""
	if dry {
		opts, suffix = []client.DeleteOption{client.DryRunAll}, " (server dry run)"
	}
	if err := client.IgnoreNotFound(hub.Delete(ctx, secret, opts...)); err != nil {
		return fmt.Errorf("delete secret %s on the hub: %w", key, err)
	}
	fmt.Fprintf(out, "secret/%s deleted%s (on the hub)\n", name, suffix)
	return nil
}
