package testoperator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/vidra-operator/vidra/internal/fleet/pull"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/operator"
)

// AgentNamespace is a pull cluster's agent namespace on its member.
const AgentNamespace = "vidra-system"

// StartAgent runs the agent of a pull cluster in the test process, wired by
// operator.NewAgent as the binary's --mode=agent wires it, against its member as member
// says (AgentConfig: with a token of the agent's ServiceAccount, as the agent's pod runs),
// until ctx ends. What differs from the binary's defaults suits a test: no endpoints are
// served, the heartbeat is every second, requests are quick.
func StartAgent(ctx context.Context, member *rest.Config, configure func(*operator.Options)) (*Operator, error) {
	log, err := testfleet.Logger()
	if err != nil {
		return nil, err
	}
	op := &Operator{Registry: prometheus.NewRegistry()}
	o := operator.DefaultOptions()
	o.Logger, o.Metrics = log.WithName("agent"), op.Registry
	o.MetricsBindAddress, o.HealthProbeBindAddress, o.WebhookBindAddress = "0", "0", "0"
	o.AgentNamespace = AgentNamespace
	o.AgentHeartbeat = time.Second
	o.RequestTimeout = 2 * time.Second
	o.MaxConcurrentReconciles = 4
	o.ContentGracePeriod = time.Minute
	o.SkipControllerNameValidation = true
	if configure != nil {
		configure(&o)
	}
	if op.Operator, err = operator.NewAgent(ctx, member, o); err != nil {
		return nil, err
	}
	op.run(ctx, log, "agent stopped")
	return op, nil
}

// AgentConfig is a config of member holding a token of the agent's ServiceAccount, and
// nothing of the admin's: the agent's rights are those enrollment gave it. The token is
// read from a file that gets a new one every agentTokenRefresh until ctx ends, as the
// kubelet refreshes a pod's projected token: an agent run longer than a token's hour (a
// soak) keeps its rights on the member.
func AgentConfig(ctx context.Context, member *testfleet.Cluster) (*rest.Config, error) {
	dir, err := os.MkdirTemp("", "vidra-agent-token-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "token")
	if err := writeAgentToken(ctx, member, path); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	go refreshAgentToken(ctx, member, path, dir)
	cfg := rest.AnonymousClientConfig(member.Config)
	cfg.BearerTokenFile = path // client-go reads it again every minute
	return cfg, nil
}

// agentTokenTTL is the agent's token's life; it is refreshed every agentTokenRefresh,
// or 10 s after a refresh the member did not answer (it may be stopped for a moment).
const (
	agentTokenTTL     = time.Hour
	agentTokenRefresh = 10 * time.Minute
)

func refreshAgentToken(ctx context.Context, member *testfleet.Cluster, path, dir string) {
	defer func() { _ = os.RemoveAll(dir) }()
	wait := agentTokenRefresh
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = agentTokenRefresh
		if err := writeAgentToken(ctx, member, path); err != nil {
			wait = 10 * time.Second
		}
	}
}

// writeAgentToken asks member for a token of the agent's ServiceAccount and puts it in
// the file at path in one step.
func writeAgentToken(ctx context.Context, member *testfleet.Cluster, path string) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: AgentNamespace, Name: pull.AgentName}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(agentTokenTTL / time.Second))}}
	if err := member.Client.SubResource("token").Create(ctx, sa, req); err != nil {
		return fmt.Errorf("token of the agent on %s: %w", member.Name, err)
	}
	next := path + ".next"
	if err := os.WriteFile(next, []byte(req.Status.Token), 0o600); err != nil {
		return err
	}
	return os.Rename(next, path)
}
