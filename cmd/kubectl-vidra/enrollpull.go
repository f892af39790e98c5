package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/identity"
	"github.com/vidra-operator/vidra/internal/fleet/pull"
	"github.com/vidra-operator/vidra/internal/runtime/version"
)

// agentImageFor is the image the agent runs: --agent-image, else the image the hub's
// operator runs in namespace (an agent of the hub's own version), else this plugin's
// release image. A development build that cannot read the hub's names no image anybody
// built, and is refused.
func (o *enrollOptions) agentImageFor(ctx context.Context, hub client.Client, namespace string, errOut io.Writer) (string, error) {
	if o.agentImage != "" {
		return o.agentImage, nil
	}
	op, err := findHubOperator(ctx, hub, namespace)
	if err == nil {
		fmt.Fprintf(errOut, "the agent runs %s, the image of the hub's operator (deployment %s); --agent-image names another\n", op.image, op.deployment)
		return op.image, nil
	}
	if image, ok := version.ReleaseImage(version.Get()); ok {
		fmt.Fprintf(errOut, "the hub's operator image could not be read (%v): the agent runs %s, of this plugin's release\n", err, image)
		return image, nil
	}
	return "", fmt.Errorf("--agent-image: the hub's operator image could not be read (%w), and this plugin (version %s) is no release whose image could stand in: name the agent's image with --agent-image, or run the agent yourself with --install-agent=false", err, version.Get())
}

// runPull enrolls a pull cluster (pull.Enroll says what it makes), then writes its
// enrollment Secret, which holds no credential.
func (o *enrollOptions) runPull(ctx context.Context, name string, labels map[string]string, out, errOut io.Writer) error {
	if o.copyCredentials {
		return errors.New("--pull: the hub holds no credential for a pull cluster; --copy-credentials does not apply")
	}
	if o.dryRun != dryRunNone {
		return errors.New("--pull: --dry-run is not supported; kubectl vidra unenroll removes what enroll --pull created")
	}
	member, err := loadMemberAccess(o.memberKubeconfig, o.memberContext)
	if err != nil {
		return err
	}
	spec, err := o.identitySpec(member)
	if err != nil {
		return err
	}
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	hubConfig, err := o.hubRESTConfig()
	if err != nil {
		return err
	}
	if err := o.refuseHubAsMember(hubConfig, member.server, "point --hub-context (or your current context) at the hub"); err != nil {
		return err
	}
	hubCluster, err := hubClusterOf(hubConfig)
	if err != nil {
		return err
	}
	hub, err := hubClientFor(hubConfig, scheme, errOut)
	if err != nil {
		return err
	}
	memberClient, err := member.client(scheme, errOut)
	if err != nil {
		return err
	}
	operatorSA, err := identity.ParseServiceAccount(o.operatorSA)
	if err != nil {
		return fmt.Errorf("--operator-service-account: %w", err)
	}
	e := pull.Enrollment{Operator: operatorSA, Cluster: name, Labels: labels, SecretNamespace: o.secretNamespace, AgentNamespace: o.agentNamespace,
		Delivery: spec, Hub: hubCluster, TokenTTL: o.tokenTTL}
	if o.installAgent {
		if e.AgentImage, err = o.agentImageFor(ctx, hub, operatorSA.Namespace, errOut); err != nil {
			return err
		}
	}
	enrollment := e.EnrollmentSecret()
	if err := o.checkPullReenrollment(ctx, hub, enrollment); err != nil {
		return err
	}
	done, err := pull.Enroll(ctx, hub, memberClient, e)
	for _, l := range done {
		fmt.Fprintln(out, l)
	}
	if err != nil {
		return fmt.Errorf("enroll %s in pull mode (member context %q): %w", name, o.memberContext, err)
	}
	o.overwrite = true // checkPullReenrollment allowed it
	action, err := o.write(ctx, hub, enrollment)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "secret/%s %s (on the hub): cluster %s enrolled in pull mode; its agent reports to the hub in namespace %s\n", name, action, name, pull.Namespace(name))
	return nil
}

// hubClusterOf is the hub as the agent reaches it: its address, TLS server name and CA,
// inline; none of the user's credentials.
func hubClusterOf(cfg *rest.Config) (*clientcmdapi.Cluster, error) {
	if cfg.Insecure {
		return nil, errors.New("--pull: the hub's context skips TLS verification; the agent verifies the hub it trusts with its token")
	}
	c := clientcmdapi.NewCluster()
	c.Server, c.TLSServerName, c.CertificateAuthorityData = cfg.Host, cfg.ServerName, cfg.CAData
	if len(c.CertificateAuthorityData) == 0 && cfg.CAFile != "" {
		data, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read the hub's CA: %w", err)
		}
		c.CertificateAuthorityData = data
	}
	return c, nil
}

// checkPullReenrollment refuses to replace an existing Secret NAME that enrolls the
// cluster in push mode, unless --overwrite: its credentials then leave the hub.
func (o *enrollOptions) checkPullReenrollment(ctx context.Context, hub client.Client, secret *corev1.Secret) error {
	var existing corev1.Secret
	err := hub.Get(ctx, client.ObjectKeyFromObject(secret), &existing)
	switch {
	case err != nil:
		return client.IgnoreNotFound(err)
	case existing.Annotations[vidrav1alpha1.ModeAnnotation] == vidrav1alpha1.ModePull || o.overwrite:
		return nil
	}
	return fmt.Errorf("secret %s/%s exists and enrolls a cluster in push mode: pass --overwrite to enroll it in pull mode instead (its credentials leave the hub)", secret.Namespace, secret.Name)
}
