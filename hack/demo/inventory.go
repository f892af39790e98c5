package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
)

// The demo's third member is enrolled from Cluster API's inventory: a Cluster in
// inventoryNamespace and the kubeconfig Secret Cluster API writes beside it. The sandbox
// hub serves a stand-in of Cluster API's Cluster CRD; no Cluster API controller runs, so
// the demo writes the Cluster's status as one would.
const (
	inventoryNamespace = "fleet-eu"
	inventoryCluster   = "par-1"
)

// enrollFromClusterAPI creates the Cluster, marks it Provisioned and writes its
// kubeconfig Secret: the operator enrolls it with a scoped identity of its own.
func (s *sandbox) enrollFromClusterAPI(ctx context.Context, _ logr.Logger) error {
	kubeconfig, err := s.inventoryMember.WriteKubeconfig(s.dir)
	if err != nil {
		return err
	}
	cluster := fmt.Sprintf(`apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: %s
  namespace: %s
  labels: {site: paris, demo-inventory: "true"}
  annotations:
    # The identity Vidra creates on the cluster may manage these namespaces alone.
    vidra.infrahub.operators.com/namespaces: web
`, inventoryCluster, inventoryNamespace)
	steps := [][]string{
		{"create", "namespace", inventoryNamespace},
		{"apply", "-f", "-"},
		{"-n", inventoryNamespace, "create", "secret", "generic", inventoryCluster + "-kubeconfig", "--type=cluster.x-k8s.io/secret", "--from-file=value=" + kubeconfig},
		{"-n", inventoryNamespace, "patch", "cluster.cluster.x-k8s.io", inventoryCluster, "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Provisioned"}}`},
	}
	for _, args := range steps {
		var stdin []byte
		if args[0] == "apply" {
			stdin = []byte(cluster)
		}
		if _, err := s.kubectl(ctx, stdin, args...); err != nil {
			return err
		}
	}
	name := inventoryNamespace + "." + inventoryCluster
	if err := s.waitFor(ctx, 60*time.Second, "VidraCluster "+name+" Engaged", func() (bool, error) {
		out, err := s.kubectl(ctx, nil, "get", "vidracluster", name, "-o", "jsonpath={.status.phase}")
		return err == nil && out == "Engaged", nil
	}); err != nil {
		return err
	}
	out, err := s.kubectl(ctx, nil, "get", "vidraclusters")
	if err != nil {
		return err
	}
	secret, err := s.kubectl(ctx, nil, "-n", operatorNamespace, "get", "secret", name, "-o", "jsonpath={.metadata.annotations.vidra\\.infrahub\\.operators\\.com/service-account}")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(os.Stdout, "%s    the hub holds a token of %s on %s, not Cluster API's admin credentials\n",
		indent("$ kubectl get vidraclusters\n"+out), strings.TrimSpace(secret), name)
	return err
}
