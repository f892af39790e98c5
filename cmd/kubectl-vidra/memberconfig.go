package main

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/vidra-operator/vidra/internal/fleet/kubeconfig"
)

// memberConfig is a member's kubeconfig as it goes into an enrollment Secret.
type memberConfig struct {
	// Data is a kubeconfig of one context, its cluster and its user, certificates inline.
	Data []byte
	// Server is the member's API server URL, normalised.
	Server string
	// Plugins names the exec and auth-provider plugins the kubeconfig runs, if any.
	Plugins []string
	// InsecureTLS is set when the server is plain http or its certificate is not checked.
	InsecureTLS bool
}

// buildMemberConfig takes contextName out of the user's kubeconfig (path, else $KUBECONFIG
// or ~/.kube/config) as a kubeconfig of its own, and checks it with the operator's own
// policy, so what the operator would refuse is refused here, before anything is written.
func buildMemberConfig(path, contextName string, allowExec, allowInsecureTLS bool) (*memberConfig, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	where := strings.Join(rules.GetLoadingPrecedence(), string(filepath.ListSeparator))
	all, err := rules.Load()
	if err != nil {
		return nil, fmt.Errorf("read kubeconfig %s: %w", where, err)
	}
	if _, ok := all.Contexts[contextName]; !ok {
		return nil, fmt.Errorf("context %q is not in kubeconfig %s (its contexts: %s)",
			contextName, where, strings.Join(slices.Sorted(maps.Keys(all.Contexts)), ", "))
	}

	one := all.DeepCopy()
	one.CurrentContext = contextName
	if err := clientcmdapi.MinifyConfig(one); err != nil {
		return nil, fmt.Errorf("context %q: %w", contextName, err)
	}
	// Certificate files become data: the operator runs elsewhere and may read no file.
	if err := clientcmdapi.FlattenConfig(one); err != nil {
		return nil, fmt.Errorf("context %q: inline its certificate files: %w", contextName, err)
	}
	data, err := clientcmd.Write(*one)
	if err != nil {
		return nil, fmt.Errorf("context %q: serialize kubeconfig: %w", contextName, err)
	}

	policy := kubeconfig.Policy{AllowExec: allowExec, AllowInsecureTLS: allowInsecureTLS}
	var execCommands, plugins []string
	for _, u := range one.AuthInfos {
		if u.Exec != nil {
			execCommands = append(execCommands, u.Exec.Command)
			plugins = append(plugins, fmt.Sprintf("exec plugin %q", u.Exec.Command))
		}
		if u.AuthProvider != nil {
			plugins = append(plugins, fmt.Sprintf("auth-provider %q", u.AuthProvider.Name))
		}
	}
	if allowExec {
		// The operator enforces its own --kubeconfig-exec-allowlist; here the user's
		// --allow-exec stands for whatever the context runs.
		policy.ExecAllowlist = execCommands
	}
	// The bytes checked are the bytes stored, read back as the operator will read them.
	cfg, err := kubeconfig.Load(data, policy)
	if err != nil {
		return nil, policyError(contextName, err)
	}
	insecure := strings.HasPrefix(cfg.Server, "http://")
	for _, c := range one.Clusters {
		insecure = insecure || c.InsecureSkipTLSVerify
	}
	return &memberConfig{Data: data, Server: cfg.Server, Plugins: plugins, InsecureTLS: insecure}, nil
}

// policyError says which rule a context breaks and what the user can do about it.
func policyError(contextName string, err error) error {
	var rejected *kubeconfig.RejectedError
	if !errors.As(err, &rejected) {
		return fmt.Errorf("context %q cannot be enrolled: %w", contextName, err)
	}
	hint := ""
	switch rejected.Reason {
	case kubeconfig.ReasonExecPlugin, kubeconfig.ReasonAuthProvider:
		hint = "; give Vidra a context with an embedded token or client certificate (such as a ServiceAccount's token), " +
			"or, if the operator runs with --allow-kubeconfig-exec and allows that command, enroll with --allow-exec"
	case kubeconfig.ReasonInsecureTLS:
		hint = "; if the operator runs with --allow-insecure-tls, enroll with --allow-insecure-tls"
	}
	return fmt.Errorf("context %q cannot be enrolled: %w%s", contextName, err, hint)
}
