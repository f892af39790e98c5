package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/pull"
)

// isPull says whether cluster name is enrolled in pull mode: its Secret says so, or the
// hub still holds its namespace.
func isPull(ctx context.Context, hub client.Client, secret *corev1.Secret, name string) (bool, error) {
	if secret != nil {
		return secret.Annotations[vidrav1alpha1.ModeAnnotation] == vidrav1alpha1.ModePull, nil
	}
	err := hub.Get(ctx, client.ObjectKey{Name: pull.Namespace(name)}, &corev1.Namespace{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// unenrollPull removes a pull cluster from both sides (pull.Unenroll says in what order).
func (o *unenrollOptions) unenrollPull(ctx context.Context, hub client.Client, secret *corev1.Secret, name string, out, errOut io.Writer) error {
	if o.dryRun != dryRunNone {
		return errors.New("a pull cluster: --dry-run is not supported")
	}
	if o.hubOnly {
		done, err := pull.UnenrollHub(ctx, hub, secret, name)
		for _, l := range done {
			fmt.Fprintln(out, l+" (on the hub)")
		}
		if err != nil {
			return fmt.Errorf("unenroll pull cluster %s from the hub: %w", name, err)
		}
		fmt.Fprintf(errOut, "Warning: what enrollment made on the member stays there (its agent, the Secret %s, the identity it applied as); its agent can no longer reach the hub.\n", vidrav1alpha1.AgentSecretName)
		return nil
	}
	if o.memberContext == "" {
		return fmt.Errorf("cluster %s is enrolled in pull mode: pass --context with access to the member to remove its agent (it is removed before the hub's side, so that it stops at once), or --hub-only when the member is gone", name)
	}
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	member, err := loadMemberAccess(o.memberKubeconfig, o.memberContext)
	if err != nil {
		return err
	}
	memberClient, err := member.client(scheme, errOut)
	if err != nil {
		return err
	}
	done, err := pull.Unenroll(ctx, hub, memberClient, name, o.agentNamespace, secret)
	for _, l := range done {
		fmt.Fprintln(out, l)
	}
	if err != nil {
		return fmt.Errorf("unenroll pull cluster %s (member context %q): %w", name, o.memberContext, err)
	}
	return nil
}
