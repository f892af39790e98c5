package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// The demo's pull member: member-2, the prod ring. The hub holds no credential for it;
// its agent (bin/vidra --mode=agent) runs beside the sandbox as its own process, as the
// chart's mode: agent would run it in a pod on the member.
const (
	// agentNamespace is the agent's namespace on the member (enroll's default).
	agentNamespace = "vidra-system"
	// agentServiceAccount is the agent's ServiceAccount there, which enroll creates.
	agentServiceAccount = "vidra-agent"
	// agentHeartbeat and agentTimeout: a stopped agent shows on the hub within a minute.
	agentHeartbeat = 5 * time.Second
	agentTimeout   = 30 * time.Second
	// agentTokenTTL is the life of the agent's token on its member: a pod's is rotated by
	// the kubelet, this one is requested once and must outlast a demo left running.
	agentTokenTTL = 24 * time.Hour
)

// isPullMember says which member the demo enrolls in pull mode.
func isPullMember(i int) bool { return i == 1 }

// enrollPull enrolls member i in pull mode, without the agent's Deployment (nothing runs
// pods here), and starts its agent.
func (s *sandbox) enrollPull(ctx context.Context, i int, labels string) (string, error) {
	m := s.fleet.Members[i]
	out, err := s.plugin(ctx, "enroll", m.Name, "--pull", "--install-agent=false", "--context", m.Name, "--hub-context", "hub", "--labels", labels)
	if err != nil {
		return out, err
	}
	kubeconfig, err := s.agentKubeconfig(ctx, m)
	if err != nil {
		return out, err
	}
	logFile, err := os.Create(s.agentLog(m.Name))
	if err != nil {
		return out, err
	}
	defer func() { _ = logFile.Close() }() // the child holds its own descriptor
	s.agent = exec.Command(filepath.Join(s.root, "bin", "vidra"),
		"--mode=agent", "--kubeconfig="+kubeconfig, "--agent-namespace="+agentNamespace,
		"--agent-heartbeat="+agentHeartbeat.String(),
		"--metrics-bind-address=0", "--health-probe-bind-address=0")
	s.agent.Stdout, s.agent.Stderr = logFile, logFile
	if err := s.agent.Start(); err != nil {
		return out, fmt.Errorf("start the agent of %s (bin/vidra --mode=agent): %w", m.Name, err)
	}
	return out, nil
}

// agentLog is where the agent of member writes.
func (s *sandbox) agentLog(member string) string {
	return filepath.Join(s.dir, "agent-"+member+".log")
}

// agentKubeconfig writes the kubeconfig the agent runs with: the member's address and CA,
// and a token of the agent's ServiceAccount (TokenRequest API), as its pod would mount;
// none of the admin's credentials.
func (s *sandbox) agentKubeconfig(ctx context.Context, m *testfleet.Cluster) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: agentNamespace, Name: agentServiceAccount}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(agentTokenTTL.Seconds()))}}
	if err := m.Client.SubResource("token").Create(ctx, sa, req); err != nil {
		return "", fmt.Errorf("token of %s/%s on %s: %w", sa.Namespace, sa.Name, m.Name, err)
	}
	admin, err := clientcmd.Load(m.Kubeconfig)
	if err != nil {
		return "", fmt.Errorf("kubeconfig of %s: %w", m.Name, err)
	}
	current, ok := admin.Contexts[admin.CurrentContext]
	if !ok {
		return "", fmt.Errorf("kubeconfig of %s has no current context", m.Name)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[m.Name] = admin.Clusters[current.Cluster]
	cfg.AuthInfos[agentServiceAccount] = &clientcmdapi.AuthInfo{Token: req.Status.Token}
	cfg.Contexts[m.Name] = &clientcmdapi.Context{Cluster: m.Name, AuthInfo: agentServiceAccount}
	cfg.CurrentContext = m.Name
	path := filepath.Join(s.dir, m.Name+"-agent.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}
