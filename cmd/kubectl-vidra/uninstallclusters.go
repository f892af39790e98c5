package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// unenrollClusters unenrolls every cluster whose Secret the operator reads, as
// kubectl vidra unenroll does: from both sides when --member-context names an admin's
// context for it, else from the hub alone, reporting what stays on the member.
func (o *uninstallOptions) unenrollClusters(ctx context.Context, hub hubAccess, r *uninstallReport, errOut io.Writer) error {
	secrets, err := enrollmentSecrets(ctx, hub.client, o.secretNamespace)
	if err != nil {
		return err
	}
	used := map[string]bool{}
	for i := range secrets {
		s := &secrets[i]
		cluster := s.Labels[vidrav1alpha1.ClusterLabel]
		if cluster == "" {
			cluster = s.Name
		}
		memberContext, named := o.memberContexts[cluster]
		if !named {
			memberContext, named = o.memberContexts[s.Name]
		}
		used[cluster], used[s.Name] = named, named
		u := &unenrollOptions{clusterFlags: o.clusterFlags, agentNamespace: o.agentNamespace, dryRun: dryRunNone}
		u.memberContext = memberContext
		if err := o.unenrollOne(ctx, hub, u, s, cluster, r, errOut); err != nil {
			return fmt.Errorf("unenroll cluster %s: %w", cluster, err)
		}
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for name := range o.memberContexts {
			if !used[name] && !yield(name) {
				return
			}
		}
	}) {
		fmt.Fprintf(errOut, "Warning: --member-context %s: no cluster of that name is enrolled on the hub\n", name)
	}
	return o.removeVidraClusters(ctx, hub.client, r)
}

// unenrollOne unenrolls one cluster; without a member context only the hub's side goes.
func (o *uninstallOptions) unenrollOne(ctx context.Context, hub hubAccess, u *unenrollOptions, s *corev1.Secret, cluster string, r *uninstallReport, errOut io.Writer) error {
	pull := s.Annotations[vidrav1alpha1.ModeAnnotation] == vidrav1alpha1.ModePull
	sa := s.Annotations[vidrav1alpha1.ServiceAccountAnnotation]
	if u.memberContext != "" {
		r.done("unenrolling cluster %s, on the member as context %s:", cluster, u.memberContext)
	} else {
		r.done("unenrolling cluster %s, on the hub only:", cluster)
	}
	switch {
	case u.memberContext != "":
		if !pull && sa == "" {
			r.leave("on %s: the credentials secret %s held (copied, not an identity of enroll) stay valid until you revoke them", cluster, s.Name)
		}
		return u.run(ctx, s.Name, r.out, io.Discard)
	case pull:
		u.hubOnly = true
		r.leave("on %s (pull mode, no --member-context): its agent in namespace %s, Secret %s, its rights, the identity it applied as, and Vidra's CRDs", cluster, o.agentNamespace, vidrav1alpha1.AgentSecretName)
		return u.run(ctx, s.Name, r.out, io.Discard)
	case sa != "":
		r.leave("on %s (no --member-context): ServiceAccount %s and its RBAC, enrollment's identity; remove them with kubectl vidra unenroll %s --context ADMIN_CONTEXT --service-account %s", cluster, sa, s.Name, sa)
	default:
		r.leave("on %s: the credentials secret %s held (copied, not an identity of enroll) stay valid until you revoke them", cluster, s.Name)
	}
	fmt.Fprintf(errOut, "Warning: cluster %s: no --member-context, so only its Secret on the hub is removed\n", cluster)
	return u.deleteSecret(ctx, hub.client, s, r.out)
}

// enrollmentSecrets are the Secrets in namespace that enroll a cluster, by either label.
func enrollmentSecrets(ctx context.Context, hub client.Client, namespace string) ([]corev1.Secret, error) {
	var found []corev1.Secret
	for _, label := range []string{vidrav1alpha1.ClusterLabel, vidrav1alpha1.LegacyClusterLabel} {
		var list corev1.SecretList
		if err := hub.List(ctx, &list, client.InNamespace(namespace), client.HasLabels{label}); err != nil {
			return nil, fmt.Errorf("list enrollment Secrets in namespace %s on the hub: %w", namespace, err)
		}
		for _, s := range list.Items {
			if !slices.ContainsFunc(found, func(f corev1.Secret) bool { return f.Name == s.Name }) {
				found = append(found, s)
			}
		}
	}
	return found, nil
}

// vidraClusterWait bounds the wait for the operator to drop the VidraClusters.
const vidraClusterWait = 30 * time.Second

// removeVidraClusters waits for the operator to remove the VidraClusters of the Secrets
// gone, and removes what it leaves (a cluster whose Secret was deleted while it was
// down).
func (o *uninstallOptions) removeVidraClusters(ctx context.Context, hub client.Client, r *uninstallReport) error {
	var list vidrav1alpha1.VidraClusterList
	err := wait.PollUntilContextTimeout(ctx, uninstallPoll, min(o.timeout, vidraClusterWait), true, func(ctx context.Context) (bool, error) {
		err := hub.List(ctx, &list)
		return err == nil && len(list.Items) == 0 || meta.IsNoMatchError(err), client.IgnoreNotFound(err)
	})
	if err == nil {
		return nil
	}
	for i := range list.Items {
		if err := client.IgnoreNotFound(hub.Delete(ctx, &list.Items[i])); err != nil {
			return fmt.Errorf("delete vidracluster %s: %w", list.Items[i].Name, err)
		}
		r.done("vidracluster/%s deleted", list.Items[i].Name)
	}
	return nil
}

// deleteHubCRDs deletes Vidra's CRDs from the hub: every object of theirs is gone, so
// deleting them deletes nothing else.
func deleteHubCRDs(ctx context.Context, hub hubAccess, r *uninstallReport) error {
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := hub.client.List(ctx, &crds); err != nil {
		return fmt.Errorf("list CRDs on the hub: %w", err)
	}
	for i := range crds.Items {
		crd := &crds.Items[i]
		if crd.Spec.Group != vidrav1alpha1.GroupVersion.Group {
			continue
		}
		if err := client.IgnoreNotFound(hub.client.Delete(ctx, crd)); err != nil {
			return fmt.Errorf("delete CRD %s: %w", crd.Name, err)
		}
		r.done("customresourcedefinition/%s deleted (on the hub)", crd.Name)
	}
	return nil
}
