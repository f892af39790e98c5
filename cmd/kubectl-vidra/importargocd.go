package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vidra-operator/vidra/internal/fleet/argocd"
	"github.com/vidra-operator/vidra/internal/fleet/kubeconfig"
)

func newImportCommand(streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import",
		Short: "List what an existing inventory would enroll (argocd)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newImportArgoCDCommand(streams))
	return cmd
}

func newImportArgoCDCommand(streams genericiooptions.IOStreams) *cobra.Command {
	flags := newHubFlags()
	namespace := "argocd"
	cmd := &cobra.Command{
		Use:   "argocd",
		Short: "List the clusters Argo CD's cluster Secrets would enroll, and those the operator would refuse",
		Long: `Read Argo CD's declarative cluster Secrets (label argocd.argoproj.io/secret-type:
cluster) in --argocd-namespace of your current context, and print, for each, the cluster
Vidra would enroll from it (VidraCluster <namespace>.<name>) or why the operator would
refuse it: credentials from a program (execProviderConfig, awsAuthConfig), none at all,
or a kubeconfig its policy refuses (insecure TLS). Nothing is written: enroll them by
running the operator with --cluster-inventory=argocd and
--cluster-inventory-namespaces=<that namespace> (chart values clusterInventory and
clusterInventoryNamespaces). No credential is printed.`,
		Example: `  kubectl vidra import argocd
  kubectl vidra import argocd --argocd-namespace gitops --context argocd-cluster`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newHubClient(flags, streams.ErrOut)
			if err != nil {
				return err
			}
			return importArgoCD(cmd.Context(), c, namespace, streams.Out)
		},
	}
	flags.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&namespace, "argocd-namespace", namespace, "The namespace of Argo CD's cluster Secrets.")
	return cmd
}

// importArgoCD prints what each Argo CD cluster Secret of namespace would enroll.
func importArgoCD(ctx context.Context, c client.Client, namespace string, out io.Writer) error {
	var list corev1.SecretList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{argocd.SecretTypeLabel: argocd.SecretTypeCluster}); err != nil {
		return fmt.Errorf("list Argo CD's cluster Secrets in namespace %s: %w", namespace, err)
	}
	if len(list.Items) == 0 {
		fmt.Fprintf(out, "No Argo CD cluster Secret in namespace %s.\n", namespace)
		return nil
	}
	slices.SortFunc(list.Items, func(a, b corev1.Secret) int { return strings.Compare(a.Name, b.Name) })
	tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "SECRET\tARGO CD NAME\tSERVER\tVIDRACLUSTER\tVERDICT")
	enrolled := 0
	for i := range list.Items {
		s := &list.Items[i]
		cl, verdict := judgeArgoCD(s)
		name := argocd.FleetName(s, cl)
		if verdict == "" {
			verdict, enrolled = "enrolled, with a scoped identity", enrolled+1
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, orNone(cl.Name), orNone(cl.Server), name, verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\n%d of %d would be enrolled with --cluster-inventory=argocd --cluster-inventory-namespaces=%s.\n", enrolled, len(list.Items), namespace)
	return nil
}

// judgeArgoCD reads the Secret as the operator would: "" when it would enroll it, else why not.
func judgeArgoCD(s *corev1.Secret) (argocd.Cluster, string) {
	cl, err := argocd.Read(s)
	if err != nil {
		return cl, "refused: " + err.Error()
	}
	if _, err := kubeconfig.Load(cl.Kubeconfig, kubeconfig.Policy{}); err != nil {
		var rejected *kubeconfig.RejectedError
		if errors.As(err, &rejected) {
			return cl, fmt.Sprintf("refused (%s): %s", rejected.Reason, rejected.Message)
		}
		return cl, "refused: " + err.Error()
	}
	return cl, ""
}
