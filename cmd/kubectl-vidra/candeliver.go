package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/policy"
)

type canDeliverOptions struct {
	hub    *genericclioptions.ConfigFlags
	as     string
	groups []string
	list   bool
}

func newCanDeliverCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &canDeliverOptions{hub: newHubFlags()}
	// Here --as and --as-group name whom the question is about (a SubjectAccessReview),
	// as a reviewer asks it; they do not impersonate, which needs other rights.
	o.hub.Impersonate, o.hub.ImpersonateUID, o.hub.ImpersonateGroup, o.hub.ImpersonateUserExtra = nil, nil, nil, nil
	cmd := &cobra.Command{
		Use:   "can-deliver CLUSTER",
		Short: "Say whether you (or --as someone) may deliver to a cluster: yes or no, and why",
		Long: `Say whether you may deliver to an enrolled cluster: yes or no, and the hub's reason.

Who may deliver where is RBAC on the hub: the verb "deliver" on the resource
vidraclusters in the API group infrahub.operators.com, with the cluster's name (its
VidraCluster's name) as the resourceName. The hub itself is the name "local". A rule
without resourceNames lets its subjects deliver to every cluster.

Without --as it asks the hub about you (a SelfSubjectAccessReview). With --as and
--as-group it asks about that user and groups (a SubjectAccessReview, which you need the
right to create: the verb create on subjectaccessreviews.authorization.k8s.io); the user
is taken to be in system:authenticated too, as every signed-in user is.

It prints "yes" or "no", a dash and the reason, and exits 0 for yes and 1 for no, as
kubectl auth can-i does. --list asks for every VidraCluster and local, in a table:

  NAME     the cluster
  DELIVER  yes or no
  ROLE     the role that lets you deliver there: one the chart offers (such as
           vidra-deliver-everywhere, bound by an admin) or a team's own; - when none
           or when the hub names none (a cluster admin's group)
  REASON   the hub's reason, or the right that is missing`,
		Example: `  # May I deliver to edge-1?
  kubectl vidra can-deliver edge-1

  # May alice, in group team-web, deliver to the hub itself?
  kubectl vidra can-deliver local --as alice --as-group team-web

  # Where may I deliver?
  kubectl vidra can-deliver --list`,
		Args: func(cmd *cobra.Command, args []string) error {
			if o.list {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			hub, err := newHubClient(o.hub, streams.ErrOut)
			if err != nil {
				return err
			}
			if o.list {
				return o.runList(cmd.Context(), hub, streams.Out)
			}
			return o.run(cmd.Context(), hub, streams.Out, args[0])
		},
	}
	o.hub.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.as, "as", "", "Ask about this user (a SubjectAccessReview) instead of about you.")
	cmd.Flags().StringArrayVar(&o.groups, "as-group", nil, "Ask about a user in this group; repeat for several.")
	cmd.Flags().BoolVar(&o.list, "list", false, "Ask for every VidraCluster and for local, and print a table.")
	return cmd
}

// verdict is the hub's answer for one cluster.
type verdict struct {
	allowed bool
	reason  string
}

// grantedBy finds the role in the reason RBAC gives for an allowed review:
// RBAC: allowed by ClusterRoleBinding "b" of ClusterRole "r" to User "u".
var grantedBy = regexp.MustCompile(`of (ClusterRole|Role) "([^"]+)"`)

// role names the role that lets one deliver, as Kind/name ("-" when the hub names none).
func (v verdict) role() string {
	if m := grantedBy.FindStringSubmatch(v.reason); v.allowed && m != nil {
		return m[1] + "/" + m[2]
	}
	return "-"
}

func (v verdict) word() string {
	if v.allowed {
		return "yes"
	}
	return "no"
}

func (o *canDeliverOptions) run(ctx context.Context, hub client.Client, out io.Writer, cluster string) error {
	v, err := o.review(ctx, hub, cluster)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s - %s\n", v.word(), v.reason)
	if !v.allowed {
		return exitError{code: 1}
	}
	return nil
}

// runList asks for local and every VidraCluster, and prints a table.
func (o *canDeliverOptions) runList(ctx context.Context, hub client.Client, out io.Writer) error {
	var list vidrav1alpha1.VidraClusterList
	if err := hub.List(ctx, &list); err != nil {
		return hubError(err, "list VidraClusters")
	}
	names := []string{vidrav1alpha1.LocalClusterName}
	for _, vc := range list.Items {
		if vc.Name != vidrav1alpha1.LocalClusterName {
			names = append(names, vc.Name)
		}
	}
	slices.Sort(names[1:])
	rows := make([][]string, 0, len(names))
	for _, name := range names {
		v, err := o.review(ctx, hub, name)
		if err != nil {
			return err
		}
		rows = append(rows, []string{name, v.word(), v.role(), singleLine(v.reason)})
	}
	return writeTable(out, []string{"NAME", "DELIVER", "ROLE", "REASON"}, rows)
}

// review asks the hub whether the caller, or the --as subject, may deliver to cluster.
func (o *canDeliverOptions) review(ctx context.Context, hub client.Client, cluster string) (verdict, error) {
	if o.as == "" && len(o.groups) == 0 {
		status, err := policy.ReviewDeliver(ctx, hub, nil, cluster)
		if err != nil {
			return verdict{}, hubError(err, "ask the hub whether you may deliver to "+cluster)
		}
		return verdictOf(status, "you", cluster), nil
	}
	who := o.subject()
	status, err := policy.ReviewDeliver(ctx, hub, &policy.Requester{User: o.as, Groups: o.subjectGroups()}, cluster)
	switch {
	case apierrors.IsForbidden(err):
		return verdict{}, fmt.Errorf("--as and --as-group ask the hub with a SubjectAccessReview, which you may not create "+
			"(it takes the verb create on subjectaccessreviews.authorization.k8s.io); without them, ask about yourself: %w", err)
	case err != nil:
		return verdict{}, hubError(err, "ask the hub whether "+who+" may deliver to "+cluster)
	}
	return verdictOf(status, who, cluster), nil
}

// verdictOf turns a review's status into a verdict with a reason: the authorizer's when
// it gives one (RBAC names the binding that allows), else the right that is missing.
func verdictOf(status authorizationv1.SubjectAccessReviewStatus, who, cluster string) verdict {
	v := verdict{allowed: status.Allowed && !status.Denied, reason: strings.TrimSpace(status.Reason)}
	if v.reason == "" {
		if v.allowed {
			v.reason = "allowed"
		} else {
			v.reason = fmt.Sprintf("nothing lets %s deliver to %s: that takes the verb %s on vidraclusters.%s named %s, or on every vidracluster",
				who, cluster, vidrav1alpha1.DeliverVerb, vidrav1alpha1.GroupVersion.Group, cluster)
		}
	}
	if e := strings.TrimSpace(status.EvaluationError); e != "" {
		v.reason += " (the hub could not evaluate every rule: " + e + ")"
	}
	return v
}

// subject names the --as user and groups in what the command prints.
func (o *canDeliverOptions) subject() string {
	parts := []string{}
	if o.as != "" {
		parts = append(parts, "user "+o.as)
	}
	if len(o.groups) > 0 {
		parts = append(parts, "groups "+strings.Join(o.groups, ","))
	}
	return strings.Join(parts, " in ")
}

// subjectGroups are the --as-group groups, and system:authenticated for a named user:
// the API server puts every signed-in user in it, and rules are often bound to it.
func (o *canDeliverOptions) subjectGroups() []string {
	groups := slices.Clone(o.groups)
	if o.as != "" && o.as != "system:anonymous" && !slices.Contains(groups, "system:authenticated") {
		groups = append(groups, "system:authenticated")
	}
	return groups
}
