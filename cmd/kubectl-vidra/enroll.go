package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/identity"
)

// Values of --dry-run, as kubectl spells them.
const (
	dryRunNone   = "none"
	dryRunClient = "client"
	dryRunServer = "server"
)

type enrollOptions struct {
	clusterFlags
	labels           map[string]string
	dryRun           string
	overwrite        bool
	allowExec        bool
	allowInsecureTLS bool
	output           *outputFlags

	// The scoped identity (the default) or the user's credentials copied (--copy-credentials).
	copyCredentials bool
	serviceAccount  string
	namespaces      []string
	clusterKinds    []string
	tokenTTL        time.Duration

	// Pull mode: an agent on the member fetches its bundles; the hub holds no credential.
	pull           bool
	agentNamespace string
	agentImage     string
	installAgent   bool
	operatorSA     string
}

const (
	enrollLong = `Enroll the cluster of one of your kubeconfig contexts into the fleet as NAME.

The member is read from your kubeconfig: --context names its context, and --kubeconfig
the file that holds it (default: $KUBECONFIG, else ~/.kube/config). Your credentials are
used on the member only, and never leave this machine. With them, enroll creates on the
member:

  - the ServiceAccount --service-account (default vidra-system/vidra), and its namespace
    if missing;
  - RBAC that lets it manage any object (as Argo CD's argocd-manager may), or with
    --namespaces only objects in those namespaces (which are created if missing), plus
    the cluster-scoped kinds of --cluster-kinds;
  - a Role that lets it request tokens for itself and nothing else of the kind;

then requests a token for it that expires after --token-ttl (TokenRequest API), and
writes on the hub the Secret NAME in --secret-namespace: a kubeconfig with that token and
the member's CA, labeled vidra.infrahub.operators.com/cluster=NAME plus --labels. With
--namespaces the Secret's delivery policy (allowed-namespaces, allowed-cluster-kinds)
says the same, so the hub refuses what the member would. The operator renews the token
well before it expires. The Secret's other labels become the VidraCluster's labels, for
clusterSelector.

Enrolling again is idempotent: the identity's RBAC is brought in line with the flags
(bindings in namespaces no longer listed are removed) and the token is replaced.
kubectl vidra unenroll removes both sides.

--copy-credentials is the original way: your context itself (with certificate files
inlined) is copied into the Secret and never expires. It is checked with the operator's
policy first: exec and auth-provider plugins (unless --allow-exec), insecure-skip-tls-
verify and plain http servers (unless --allow-insecure-tls), and any file reference
left are refused, with the rule named, before anything is written. An existing Secret
NAME is then left alone unless --overwrite is given.

--pull enrolls it in pull mode: an agent on the member fetches its bundles, and the hub
holds no credential for it. On the hub, enroll creates the namespace vidra-pull-NAME with
the agent's ServiceAccount vidra-agent, which may only read the cluster's bundles and
content there, write their status, its heartbeat and what the member serves, and renew
its token (--token-ttl, a week by default); it binds the hub operator (--operator-service-account) there to
the chart's ClusterRole <name>-pull. On the member: the identity above (the agent applies
as it), Vidra's CRDs, the agent's ServiceAccount and RBAC, the Secret vidra-agent-hub in
--agent-namespace (the hub's address and CA, the agent's token, and --namespaces as the
member's own policy, which the agent enforces), and the agent's Deployment of
--agent-image (--install-agent=false: run it with the chart's mode: agent, or bin/vidra
--mode=agent). The Secret NAME on the hub holds no credential. --dry-run does not apply.

The hub is reached with --hub-kubeconfig and --hub-context (kubectl's --kubeconfig and
--context under other names, since those two name the member here). By default the hub
is the current context of the same kubeconfig as the member.`

	enrollExample = `  # Enroll context "edge-1-admin" of your kubeconfig as cluster edge-1; the hub is your current context.
  kubectl vidra enroll edge-1 --context edge-1-admin --labels site=paris,tier=edge

  # The hub may deliver to namespaces web and db only, and create Namespaces and CRDs.
  kubectl vidra enroll edge-2 --context edge-2-admin --namespaces web,db \
    --cluster-kinds Namespace,CustomResourceDefinition.apiextensions.k8s.io

  # Look at everything enroll would create, without creating anything.
  kubectl vidra enroll edge-1 --context edge-1-admin --dry-run=client -o yaml

  # The member's context is in another file, the hub is context "hub" of ~/.kube/config.
  kubectl vidra enroll edge-3 --kubeconfig edge-3.kubeconfig --context admin \
    --hub-kubeconfig ~/.kube/config --hub-context hub

  # The original way: copy the context's own credentials into the Secret.
  kubectl vidra enroll edge-4 --context edge-4-robot --copy-credentials

  # Pull mode: an agent on edge-5 fetches its bundles; the hub keeps no credential for it.
  kubectl vidra enroll edge-5 --pull --context edge-5-admin --namespaces web,db`
)

func newEnrollCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &enrollOptions{clusterFlags: newClusterFlags(), output: newOutputFlags(false, "one line saying what was done")}
	cmd := &cobra.Command{
		Use:     "enroll NAME --context MEMBER_CONTEXT",
		Short:   "Enroll a cluster: create a scoped, short-lived identity on it and its Secret on the hub",
		Long:    enrollLong,
		Example: enrollExample,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), args[0], streams.Out, streams.ErrOut)
		},
	}
	o.addFlags(cmd.Flags())
	o.output.addFlags(cmd)
	_ = cmd.MarkFlagRequired("context")
	return cmd
}

// addFlags binds enroll's flags to o.
func (o *enrollOptions) addFlags(flags *pflag.FlagSet) {
	o.addClusterFlags(flags, "The kubeconfig context of the cluster to enroll (required).")
	flags.StringToStringVar(&o.labels, "labels", nil, "More labels of the Secret, as `key=value,...`; they become the VidraCluster's labels, for clusterSelector.")
	flags.Lookup("labels").DefValue = "" // "(default [])" would say nothing
	flags.StringVar(&o.dryRun, "dry-run", dryRunNone, `"client" prints the Secret without contacting the hub; "server" has the hub validate it without storing it.`)
	flags.BoolVar(&o.overwrite, "overwrite", false, "Replace the kubeconfig and labels of an existing Secret NAME that holds other credentials.")
	flags.StringVar(&o.serviceAccount, "service-account", identity.DefaultServiceAccount.String(), "The member's ServiceAccount (NAMESPACE/NAME) the hub acts as; created with its RBAC.")
	flags.StringSliceVar(&o.namespaces, "namespaces", nil, "Narrow the identity to these namespaces (created if missing); without it, it may manage any object.")
	flags.StringSliceVar(&o.clusterKinds, "cluster-kinds", nil, "With --namespaces: the cluster-scoped kinds (Kind.group, Namespace for the core group) it may manage too.")
	flags.DurationVar(&o.tokenTTL, "token-ttl", 0, "The lifetime of the identity's tokens (at least 10m; default 1h, with --pull 168h: an agent survives a hub outage of 9/10 of it); they are renewed before they expire.")
	flags.BoolVar(&o.copyCredentials, "copy-credentials", false, "Copy the context's own credentials into the Secret instead of creating an identity (the original way; they never expire).")
	flags.BoolVar(&o.allowExec, "allow-exec", false, "With --copy-credentials: accept a context whose user runs an exec or auth-provider plugin; the operator must run with --allow-kubeconfig-exec and allow the command.")
	flags.BoolVar(&o.allowInsecureTLS, "allow-insecure-tls", false, "Accept insecure-skip-tls-verify and plain http servers; the operator must run with --allow-insecure-tls.")
	flags.BoolVar(&o.pull, "pull", false, "Enroll in pull mode: an agent installed on the member fetches its bundles from the hub, which holds no credential for the member.")
	flags.StringVar(&o.agentNamespace, "agent-namespace", "vidra-system", "With --pull: the agent's namespace on the member, which holds its Secret vidra-agent-hub.")
	flags.StringVar(&o.agentImage, "agent-image", "", "With --pull: the agent's image (Vidra's own, run with --mode=agent); default: the image the hub's operator runs (its Deployment in the namespace of --operator-service-account), else this plugin's release image.")
	flags.StringVar(&o.operatorSA, "operator-service-account", "vidra-system/vidra", "With --pull: the hub operator's ServiceAccount (NAMESPACE/NAME), bound in the cluster's namespace on the hub to the chart's ClusterRole NAME-pull.")
	flags.BoolVar(&o.installAgent, "install-agent", true, "With --pull: create the agent's Deployment; false when it runs otherwise (its chart, mode: agent; or bin/vidra --mode=agent).")
}

func (o *enrollOptions) run(ctx context.Context, name string, out, errOut io.Writer) error {
	if o.tokenTTL == 0 {
		o.tokenTTL = defaultTokenTTL(o.pull)
	}
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fmt.Errorf("cluster name %q: %s", name, strings.Join(errs, "; "))
	}
	labels, err := o.secretLabels(name)
	if err != nil {
		return err
	}
	if o.dryRun != dryRunNone && o.dryRun != dryRunClient && o.dryRun != dryRunServer {
		return fmt.Errorf(`--dry-run must be "none", "client" or "server", not %q`, o.dryRun)
	}
	if err := o.output.validate(); err != nil {
		return err
	}
	if o.pull {
		return o.runPull(ctx, name, labels, out, errOut)
	}
	if !o.copyCredentials {
		return o.runIdentity(ctx, name, labels, out, errOut)
	}
	if o.namespaces != nil || o.clusterKinds != nil {
		return fmt.Errorf("--namespaces and --cluster-kinds narrow the identity enroll creates; with --copy-credentials the context's own access applies (narrow delivery with the Secret's allowed-namespaces annotation)")
	}

	member, err := buildMemberConfig(o.memberKubeconfig, o.memberContext, o.allowExec, o.allowInsecureTLS)
	if err != nil {
		return err
	}
	o.warnAllowed(errOut, member)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.secretNamespace, Labels: labels},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{vidrav1alpha1.KubeconfigKey: member.Data},
	}
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	if o.dryRun == dryRunClient {
		return o.report(out, scheme, secret, "created (dry run)")
	}

	hub, err := o.hubClient(scheme, member.Server, errOut)
	if err != nil {
		return err
	}
	action, err := o.write(ctx, hub, secret)
	if err != nil {
		return err
	}
	return o.report(out, scheme, secret, action)
}

// secretLabels are --labels plus the enrollment label, which only NAME may set.
func (o *enrollOptions) secretLabels(name string) (map[string]string, error) {
	labels := map[string]string{}
	for k, v := range o.labels {
		if k == vidrav1alpha1.ClusterLabel {
			return nil, fmt.Errorf("--labels: %s is set from NAME; leave it out", k)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("--labels: key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("--labels: value %q of %s: %s", v, k, strings.Join(errs, "; "))
		}
		labels[k] = v
	}
	labels[vidrav1alpha1.ClusterLabel] = name
	return labels, nil
}

// warnAllowed reminds the user that what --allow-* let through here the operator refuses
// unless it was started to allow it too.
func (o *enrollOptions) warnAllowed(errOut io.Writer, member *memberConfig) {
	if len(member.Plugins) > 0 {
		fmt.Fprintf(errOut, "Warning: context %q runs %s; the operator engages it only with --allow-kubeconfig-exec (and an exec command in --kubeconfig-exec-allowlist).\n",
			o.memberContext, strings.Join(member.Plugins, ", "))
	}
	if member.InsecureTLS {
		fmt.Fprintf(errOut, "Warning: context %q does not check the server's certificate (or uses plain http); the operator engages it only with --allow-insecure-tls.\n",
			o.memberContext)
	}
}

// write creates the Secret, or replaces an existing one's kubeconfig and labels with
// --overwrite, and returns what it did as kubectl words it.
func (o *enrollOptions) write(ctx context.Context, hub client.Client, secret *corev1.Secret) (string, error) {
	name, ns := secret.Name, secret.Namespace
	if err := refuseSecondEnrollment(ctx, hub, secret); err != nil {
		return "", err
	}
	var opts []client.CreateOption
	var updateOpts []client.UpdateOption
	suffix := ""
	if o.dryRun == dryRunServer {
		opts, updateOpts, suffix = []client.CreateOption{client.DryRunAll}, []client.UpdateOption{client.DryRunAll}, " (server dry run)"
	}

	var existing corev1.Secret
	err := hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &existing)
	switch {
	case apierrors.IsNotFound(err):
		if err := hub.Create(ctx, secret, opts...); err != nil {
			if apierrors.IsNotFound(err) {
				return "", fmt.Errorf("create secret %s/%s: %w (does the operator read Secrets from another namespace? see --secret-namespace)", ns, name, err)
			}
			return "", fmt.Errorf("create secret %s/%s on the hub: %w", ns, name, err)
		}
		return "created" + suffix, nil
	case err != nil:
		return "", fmt.Errorf("read secret %s/%s on the hub: %w", ns, name, err)
	case !o.overwrite:
		return "", fmt.Errorf("secret %s/%s already exists on the hub; pass --overwrite to replace its kubeconfig and labels", ns, name)
	}
	// The resourceVersion just read makes the update fail rather than undo a concurrent one.
	existing.Labels = secret.Labels
	existing.Data = secret.Data
	existing.Annotations = mergeAnnotations(existing.Annotations, secret.Annotations)
	if err := hub.Update(ctx, &existing, updateOpts...); err != nil {
		return "", fmt.Errorf("update secret %s/%s on the hub: %w", ns, name, err)
	}
	existing.DeepCopyInto(secret)
	return "configured" + suffix, nil
}

// defaultTokenTTL is the lifetime of an identity's tokens unless --token-ttl says: an
// hour for the hub's identity on a member, which the operator renews while it runs; a
// week for a pull agent's on the hub, since an expired token cannot be renewed and the
// agent must outlast the hub's outages.
func defaultTokenTTL(pull bool) time.Duration {
	if pull {
		return 7 * 24 * time.Hour
	}
	return time.Hour
}

// mergeAnnotations are an existing Secret's annotations once enroll has written wanted:
// the ServiceAccount annotation goes with credentials that are not an identity's, and a
// delivery policy enroll set for a narrowed identity goes with that identity. A policy a
// person set stays, and so does any policy when credentials are copied (the safer side).
func mergeAnnotations(existing, wanted map[string]string) map[string]string {
	out := maps.Clone(existing)
	if out == nil {
		out = map[string]string{}
	}
	_, isIdentity := wanted[vidrav1alpha1.ServiceAccountAnnotation]
	if !isIdentity {
		delete(out, vidrav1alpha1.ServiceAccountAnnotation)
	}
	if _, isPull := wanted[vidrav1alpha1.ModeAnnotation]; !isPull {
		delete(out, vidrav1alpha1.ModeAnnotation) // a pull cluster enrolled again in push mode
	}
	if isIdentity && out[identity.PolicyFromEnrollAnnotation] != "" {
		delete(out, vidrav1alpha1.AllowedNamespacesAnnotation)
		delete(out, vidrav1alpha1.AllowedClusterKindsAnnotation)
		delete(out, identity.PolicyFromEnrollAnnotation)
	}
	maps.Copy(out, wanted)
	return out
}

// refuseSecondEnrollment refuses a Secret for a cluster that another Secret enrolls
// already: the operator would reject the later one as a conflict.
func refuseSecondEnrollment(ctx context.Context, hub client.Client, secret *corev1.Secret) error {
	var list corev1.SecretList
	err := hub.List(ctx, &list, client.InNamespace(secret.Namespace), client.MatchingLabels{vidrav1alpha1.ClusterLabel: secret.Name})
	if apierrors.IsForbidden(err) {
		return nil // The check helps; a user who may only create Secrets can still enroll.
	}
	if err != nil {
		return fmt.Errorf("list enrollment secrets in %s on the hub: %w", secret.Namespace, err)
	}
	for _, s := range list.Items {
		if s.Name != secret.Name {
			return fmt.Errorf("cluster %s is already enrolled by secret %s/%s; delete that Secret first, or enroll under another name", secret.Name, s.Namespace, s.Name)
		}
	}
	return nil
}

// report prints the Secret with -o, else one line saying what happened and what to watch.
func (o *enrollOptions) report(out io.Writer, scheme *runtime.Scheme, secret *corev1.Secret, action string) error {
	if !o.output.table() {
		return o.output.printObject(out, scheme, secret)
	}
	if o.dryRun != dryRunNone {
		fmt.Fprintf(out, "secret/%s %s\n", secret.Name, action)
		return nil
	}
	fmt.Fprintf(out, "secret/%s %s; watch it with: kubectl get vidraclusters %s\n", secret.Name, action, secret.Name)
	return nil
}
