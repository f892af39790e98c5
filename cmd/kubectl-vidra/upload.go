package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/engine/manifest"
)

type uploadOptions struct {
	hub              *genericclioptions.ConfigFlags
	file             string
	contentNamespace string
	cluster          string
	server           string
	namespace        string
}

func newUploadCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &uploadOptions{hub: newHubFlags()}
	cmd := &cobra.Command{
		Use:   "upload [NAME] -f FILE",
		Short: "Store a manifest bundle of any size on the hub and deliver it with a VidraResource",
		Long: `Store a manifest bundle (multi-document YAML or JSON) in Vidra's content store on the hub:
compressed, addressed by its sha256 and split into Secrets small enough for the API
server, so a bundle far larger than one Kubernetes object can hold is delivered like any
other. The bundle is checked first: a document that does not decode is reported with its
index and nothing is stored.

With NAME, the VidraResource NAME is created (or updated) to deliver the stored bundle
(spec.content), to --cluster or --destination-server (neither: the hub itself). Without NAME, the
digest is printed for a VidraResource of your own:

  spec:
    content: {digest: sha256:...}

Storing the same bundle again writes nothing. Content that no VidraResource names is
deleted by the operator after its grace period (--content-grace-period, 10m).`,
		Example: `  # Deliver a large bundle to edge-1, into namespace argocd by default.
  kubectl vidra upload argocd -f install.yaml --cluster edge-1 --namespace argocd

  # Store it only, and print its digest.
  kubectl vidra upload -f install.yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return o.run(cmd.Context(), name, streams.In, streams.Out, streams.ErrOut)
		},
	}
	cmd.Flags().StringVarP(&o.file, "filename", "f", "", "The bundle to upload; - reads standard input.")
	cmd.Flags().StringVar(&o.contentNamespace, "content-namespace", "vidra-system", "The operator's content store namespace (its --content-namespace).")
	cmd.Flags().StringVar(&o.cluster, "cluster", "", "With NAME: the enrolled cluster to deliver to.")
	cmd.Flags().StringVar(&o.server, "destination-server", "", "With NAME: the API server URL of the cluster to deliver to (as destination.server).")
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "With NAME: the destination namespace of namespaced objects that name none.")
	_ = cmd.MarkFlagRequired("filename")
	o.hub.AddFlags(cmd.Flags())
	return cmd
}

func (o *uploadOptions) run(ctx context.Context, name string, in io.Reader, out, errOut io.Writer) error {
	if name == "" && (o.cluster != "" || o.server != "" || o.namespace != "") {
		return fmt.Errorf("--cluster, --destination-server and --namespace say where a VidraResource delivers: give its NAME too")
	}
	data, err := readBundle(o.file, in)
	if err != nil {
		return err
	}
	objects, err := manifest.Decode(data)
	if err != nil {
		return fmt.Errorf("%s is not a manifest bundle: %w", o.file, err)
	}
	hub, err := newHubClient(o.hub, errOut)
	if err != nil {
		return err
	}
	store := &content.Store{Client: hub, Reader: hub, Namespace: o.contentNamespace}
	digest, err := store.Put(ctx, data)
	if err != nil {
		return hubError(err, "store the bundle in namespace "+o.contentNamespace)
	}
	info, err := store.Stat(ctx, digest)
	if err != nil {
		return hubError(err, "read back the stored bundle")
	}
	fmt.Fprintf(out, "stored %s: %d objects, %d bytes in %d chunks in namespace %s\n", digest, len(objects), info.Size, info.Chunks, o.contentNamespace)
	if name == "" {
		return nil
	}
	action, err := o.deliver(ctx, hub, name, digest)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "vidraresource/%s %s\n", name, action)
	return nil
}

// deliver creates the VidraResource, or points an existing one at the digest; its other
// fields keep their values, and the destination changes only where a flag says so.
func (o *uploadOptions) deliver(ctx context.Context, hub client.Client, name, digest string) (string, error) {
	ref := &vidrav1alpha1.ContentReference{Digest: digest}
	vr := &vidrav1alpha1.VidraResource{}
	err := hub.Get(ctx, client.ObjectKey{Name: name}, vr)
	if apierrors.IsNotFound(err) {
		vr = &vidrav1alpha1.VidraResource{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: vidrav1alpha1.VidraResourceSpec{
				Destination: vidrav1alpha1.Destination{Cluster: o.cluster, Server: o.server, Namespace: o.namespace},
				Content:     ref,
			},
		}
		if err := hub.Create(ctx, vr); err != nil {
			return "", hubError(err, "create VidraResource "+name)
		}
		return "created", nil
	}
	if err != nil {
		return "", hubError(err, "get VidraResource "+name)
	}
	before := vr.DeepCopy()
	vr.Spec.Manifest, vr.Spec.Content = "", ref
	if o.cluster != "" || o.server != "" {
		vr.Spec.Destination.Cluster, vr.Spec.Destination.Server = o.cluster, o.server
	}
	if o.namespace != "" {
		vr.Spec.Destination.Namespace = o.namespace
	}
	if err := hub.Patch(ctx, vr, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return "", hubError(err, "update VidraResource "+name)
	}
	if vr.Generation == before.Generation {
		return "unchanged", nil
	}
	return "configured", nil
}

func readBundle(file string, in io.Reader) ([]byte, error) {
	if file == "-" {
		data, err := io.ReadAll(io.LimitReader(in, content.MaxSize+1))
		if err != nil {
			return nil, fmt.Errorf("read standard input: %w", err)
		}
		return data, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read the bundle: %w", err)
	}
	return data, nil
}
