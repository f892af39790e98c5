package fleetenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// ErrNoHelm says $HELM names no helm binary (make test sets it; make helm builds one).
var ErrNoHelm = errors.New("HELM is not set: run `make test`, or set HELM to a helm binary (make helm builds bin/tools/helm-v3.19.0)")

// Chart is the module's Helm chart, charts/vidra, used with the helm binary of $HELM as a
// user would: rendered, linted, installed on the hub.
type Chart struct {
	helm, dir string
}

// TheChart returns the module's chart, or ErrNoHelm.
func TheChart() (Chart, error) {
	helm := os.Getenv("HELM")
	if helm == "" {
		return Chart{}, ErrNoHelm
	}
	root, err := testfleet.ModuleRoot()
	if err != nil {
		return Chart{}, err
	}
	return Chart{helm: helm, dir: filepath.Join(root, "charts", "vidra")}, nil
}

// Dir is the chart's directory.
func (c Chart) Dir() string {
	return c.dir
}

// Helm runs helm with args, its caches and configuration in a directory of its own, and
// returns its standard output; the error holds both outputs.
func (c Chart) Helm(ctx context.Context, args ...string) (string, error) {
	home, err := os.MkdirTemp("", "vidra-helm-")
	if err != nil {
		return "", fmt.Errorf("helm home: %w", err)
	}
	defer func() { _ = os.RemoveAll(home) }()
	if len(args) > 0 && args[0] == "template" {
		args = append(args, "--kube-version", testfleet.KubeVersion)
	}
	cmd := exec.CommandContext(ctx, c.helm, args...)
	cmd.Env = append(os.Environ(), "HOME="+home,
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %v: %w: %s%s", args, err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// Render runs helm template for release in namespace with the --set values given, and
// parses what it renders.
func (c Chart) Render(ctx context.Context, release, namespace string, sets ...string) ([]*unstructured.Unstructured, error) {
	args := []string{"template", release, c.dir, "--namespace", namespace}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := c.Helm(ctx, args...)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(out, "\n---") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			return nil, fmt.Errorf("a rendered document does not parse: %w\n%s", err, doc)
		}
		if len(m) != 0 {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("helm template %v rendered nothing", sets)
	}
	return objs, nil
}

// OperatorArgs are the arguments the rendered Deployment gives the operator.
func OperatorArgs(objs []*unstructured.Unstructured) ([]string, error) {
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if len(containers) == 0 {
			return nil, fmt.Errorf("the rendered Deployment %s has no container", o.GetName())
		}
		container, _ := containers[0].(map[string]any)
		args, _, err := unstructured.NestedStringSlice(container, "args")
		return args, err
	}
	return nil, errors.New("the chart rendered no Deployment")
}

// ServiceAccountKubeconfig is the hub's admin kubeconfig changed to act as the
// ServiceAccount namespace/name: an operator using it has exactly that account's rights.
func ServiceAccountKubeconfig(hubKubeconfig []byte, namespace, name string) ([]byte, error) {
	cfg, err := clientcmd.Load(hubKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("hub kubeconfig: %w", err)
	}
	kctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return nil, fmt.Errorf("hub kubeconfig has no current context %q", cfg.CurrentContext)
	}
	auth, ok := cfg.AuthInfos[kctx.AuthInfo]
	if !ok {
		return nil, fmt.Errorf("hub kubeconfig has no user %q", kctx.AuthInfo)
	}
	auth.Impersonate = "system:serviceaccount:" + namespace + ":" + name
	auth.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace}
	return clientcmd.Write(*cfg)
}
