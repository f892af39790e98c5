package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vidra-operator/vidra/internal/runtime/version"
)

// operatorContainer and operatorNameLabel find the operator's Deployment as the chart
// labels it; its image says which version runs.
const (
	operatorContainer = "vidra"
	operatorNameLabel = "app.kubernetes.io/name"
)

// hubOperator is the operator a hub runs, as its Deployment says.
type hubOperator struct {
	deployment, image, version string
	labels                     map[string]string
}

// errNoOperator: the namespace holds no Deployment of Vidra's.
var errNoOperator = errors.New("no Vidra operator")

// findHubOperator reads the Deployment of the operator in namespace, labeled as the chart
// labels it; its version is its image's tag.
func findHubOperator(ctx context.Context, hub client.Client, namespace string) (hubOperator, error) {
	var list appsv1.DeploymentList
	if err := hub.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{operatorNameLabel: operatorContainer}); err != nil {
		return hubOperator{}, fmt.Errorf("list Deployments in namespace %s on the hub: %w", namespace, err)
	}
	slices.SortFunc(list.Items, func(a, b appsv1.Deployment) int { return strings.Compare(a.Name, b.Name) })
	for _, d := range list.Items {
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name == operatorContainer {
				v := imageTag(c.Image)
				if v == "" {
					v = "(untagged)"
				}
				return hubOperator{deployment: d.Namespace + "/" + d.Name, image: c.Image, version: v, labels: d.Labels}, nil
			}
		}
	}
	return hubOperator{}, fmt.Errorf("%w in namespace %s (a Deployment labeled %s=%s)", errNoOperator, namespace, operatorNameLabel, operatorContainer)
}

// imageTag is the tag of an image reference, "" when it names none (a digest alone).
func imageTag(image string) string {
	name, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		return name[i+1:]
	}
	return ""
}

type versionOptions struct {
	hub        *genericclioptions.ConfigFlags
	namespace  string
	clientOnly bool
}

func newVersionCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &versionOptions{hub: newHubFlags()}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version and the version of the hub's operator",
		Long: `Print the version of this plugin, and of the operator the hub runs: the tag of the image
of its Deployment in --namespace (labeled app.kubernetes.io/name=vidra, as the chart
labels it), which needs the right to list Deployments there. When the hub cannot be
read, the plugin's version is printed and the reason said on stderr.`,
		Example: `  kubectl vidra version
  kubectl vidra version --client`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), streams.Out, streams.ErrOut)
		},
	}
	o.hub.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.namespace, "namespace", "vidra-system", "The hub operator's namespace.")
	cmd.Flags().BoolVar(&o.clientOnly, "client", false, "Print the plugin's version alone, without asking the hub.")
	return cmd
}

func (o *versionOptions) run(ctx context.Context, out, errOut io.Writer) error {
	fmt.Fprintf(out, "client: %s\n", version.Get())
	if o.clientOnly {
		return nil
	}
	hub, err := newHubClient(o.hub, errOut)
	if err == nil {
		var op hubOperator
		if op, err = findHubOperator(ctx, hub, o.namespace); err == nil {
			fmt.Fprintf(out, "hub: %s (%s, deployment %s)\n", op.version, op.image, op.deployment)
			return nil
		}
	}
	if apierrors.IsForbidden(err) {
		err = fmt.Errorf("%w (the hub's version needs the right to list Deployments in %s)", err, o.namespace)
	}
	fmt.Fprintf(errOut, "hub: unknown: %v\n", err)
	return nil
}
