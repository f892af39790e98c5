package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

const (
	// databaseSyncName delivers a stand-in database whose health is its cluster's label.
	databaseSyncName = "demo-database"
	// appSyncName delivers the app that waits for it, cluster by cluster.
	appSyncName = "demo-app"
	// heldBack is the member whose database is still provisioning at first.
	heldBack = "member-2"
)

// orderFiles are the repository's database/ and app/ directories: a database that says
// it is ready when its cluster's label database=ready says so (postBuild), judged by a
// CEL health check, and an app.
func orderFiles() map[string]string {
	return map[string]string{
		"database/database.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: database\n  namespace: " + gitNamespace +
			"\ndata:\n  state: ${cluster.labels.database:=provisioning}\n",
		"app/app.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: " + gitNamespace +
			"\ndata:\n  database: database." + gitNamespace + "\n",
	}
}

// applyOrderedSyncs labels member-1's database ready, then applies the database's
// GitSync and the app's, which depends on it.
func (s *sandbox) applyOrderedSyncs(ctx context.Context, _ logr.Logger) error {
	if err := s.labelDatabase(ctx, "member-1"); err != nil {
		return err
	}
	syncs := fmt.Sprintf(`apiVersion: infrahub.operators.com/v1alpha1
kind: GitSync
metadata:
  name: %[1]s
spec:
  interval: 30s
  source: {url: %[3]s, ref: {branch: main}, path: database, insecureAllowHTTP: true}
  destination:
    clusterSelector: {matchLabels: {demo: "true"}}
  postBuild: {}               # ${cluster.labels.database}
  healthCheckExprs:           # Ready when the database says so
    - apiVersion: v1
      kind: ConfigMap
      current: data.state == 'ready'
      inProgress: data.state != 'ready'
---
apiVersion: infrahub.operators.com/v1alpha1
kind: GitSync
metadata:
  name: %[2]s
spec:
  interval: 30s
  source: {url: %[3]s, ref: {branch: main}, path: app, insecureAllowHTTP: true}
  destination:
    clusterSelector: {matchLabels: {demo: "true"}}
  dependsOn:
    - {kind: GitSync, name: %[1]s}
`, databaseSyncName, appSyncName, s.gitURL)
	if err := os.WriteFile(filepath.Join(s.dir, "ordered-syncs.yaml"), []byte(syncs), 0o600); err != nil {
		return err
	}
	_, err := s.kubectl(ctx, []byte(syncs), "apply", "-f", "-")
	return err
}

// labelDatabase says, as an admin labels an enrollment, that member's database is ready.
func (s *sandbox) labelDatabase(ctx context.Context, member string) error {
	_, err := s.kubectl(ctx, nil, "-n", operatorNamespace, "label", "secret", member, "database=ready", "--overwrite")
	return err
}

// waitHeldBack waits until the app is Ready on member-1 and held back on member-2, and
// shows it.
func (s *sandbox) waitHeldBack(ctx context.Context, _ logr.Logger) error {
	err := s.waitFor(ctx, 90*time.Second, "the app Ready on member-1 and waiting on "+heldBack, func() (bool, error) {
		states := s.appStates(ctx)
		return states["member-1"] == "True/"+vidrav1alpha1.ReasonSucceeded && states[heldBack] == "False/"+vidrav1alpha1.ReasonDependencyNotReady, nil
	})
	if err != nil {
		return fmt.Errorf("%w; the app's VidraResources say: %v", err, s.appStates(ctx))
	}
	return s.showApp(ctx, os.Stdout)
}

// releaseHeldBack labels member-2's database ready and waits for the app to follow.
func (s *sandbox) releaseHeldBack(ctx context.Context, _ logr.Logger) error {
	if err := s.labelDatabase(ctx, heldBack); err != nil {
		return err
	}
	err := s.waitFor(ctx, 90*time.Second, "the app Ready on both members", func() (bool, error) {
		states := s.appStates(ctx)
		return states["member-1"] == "True/"+vidrav1alpha1.ReasonSucceeded && states[heldBack] == "True/"+vidrav1alpha1.ReasonSucceeded, nil
	})
	if err != nil {
		return fmt.Errorf("%w; the app's VidraResources say: %v", err, s.appStates(ctx))
	}
	return s.showApp(ctx, os.Stdout)
}

// appStates is, by cluster, the Ready status and reason of the app's VidraResources.
func (s *sandbox) appStates(ctx context.Context) map[string]string {
	out, _ := s.kubectl(ctx, nil, "get", "vidraresources", "-l", vidrav1alpha1.GitSyncLabel+"="+appSyncName, "-o",
		`jsonpath={range .items[*]}{.spec.destination.cluster}={.status.conditions[?(@.type=="Ready")].status}/{.status.conditions[?(@.type=="Ready")].reason}{"\n"}{end}`)
	states := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if cluster, state, ok := strings.Cut(line, "="); ok {
			states[cluster] = state
		}
	}
	return states
}

// showApp prints the app's VidraResources and what the held-back one waits for.
func (s *sandbox) showApp(ctx context.Context, out io.Writer) error {
	list, err := s.kubectl(ctx, nil, "get", "vidraresources", "-l", vidrav1alpha1.GitSyncLabel+"="+appSyncName)
	if err != nil {
		return err
	}
	fmt.Fprint(out, indent(list))
	names, err := s.kubectl(ctx, nil, "get", "vidraresources", "-l", vidrav1alpha1.GitSyncLabel+"="+appSyncName,
		"-o", `jsonpath={range .items[?(@.spec.destination.cluster=="`+heldBack+`")]}{.metadata.name}{end}`)
	if err != nil || names == "" {
		return err
	}
	described, err := s.plugin(ctx, "describe", names, "--context", "hub")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(described, "\n") {
		if strings.HasPrefix(line, "Depends on:") || strings.HasPrefix(strings.TrimSpace(line), "Waiting:") {
			fmt.Fprintf(out, "    kubectl vidra describe %s: %s\n", names, strings.Join(strings.Fields(line), " "))
		}
	}
	return nil
}
