package testoperator

import (
	"context"
	"fmt"
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
// nothing of the admin's: the agent's rights are those enrollment gave it.
func AgentConfig(ctx context.Context, member *testfleet.Cluster) (*rest.Config, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: AgentNamespace, Name: pull.AgentName}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}
	if err := member.Client.SubResource("token").Create(ctx, sa, req); err != nil {
		return nil, fmt.Errorf("token of the agent on %s: %w", member.Name, err)
	}
	cfg := rest.AnonymousClientConfig(member.Config)
	cfg.BearerToken = req.Status.Token
	return cfg, nil
}
