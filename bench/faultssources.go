package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
	"github.com/vidra-operator/vidra/internal/test/helmrepo"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/ociregistry"
)

// sourceKinds are the phase's syncs, one of each kind, each named soak-<kind>.
var sourceKinds = []string{"infrahub", "git", "oci", "helm"}

// sharingKinds are the syncs whose bundles all hold the shared ConfigMap: one object
// with three owners on every cluster (a Helm rendering carries labels of its own, so
// Helm's bundle keeps to its own objects).
var sharingKinds = []string{"infrahub", "git", "oci"}

const (
	faultsGitRepo    = "soak"
	faultsOCIRepo    = "soak/manifests"
	faultsChart      = "ingress-nginx" // a testdata chart whose template the bundle replaces
	faultsSharedName = "shared"
	// faultsSyncPrefix begins each sync's name and each credentials Secret's.
	faultsSyncPrefix  = "soak-"
	faultsSyncSeconds = 10
)

// faultsSyncName is the name of the phase's sync of kind k: soak-git for GitSync.
func faultsSyncName(k vidrav1alpha1.SyncKind) string {
	return faultsSyncPrefix + strings.ToLower(strings.TrimSuffix(k.Kind, "Sync"))
}

// faultSources are the phase's four sources, each requiring credentials, and the
// revision each is at.
type faultSources struct {
	objects  int
	log      io.Writer
	host     *gitHost
	git      *gitserver.Server
	repo     *gitserver.Repo
	registry *ociregistry.Registry
	helm     *helmrepo.Repo
	infrahub *infrahubtest.Server
	// password and token are the sources' credentials: no log may hold them.
	password, token string

	mu       sync.Mutex
	clusters []string
	latest   map[string]int
	// faulted counts the faults on each kind; undo holds how to end the current one.
	faulted map[string]int
	undo    map[string]func()
}

func newFaultSources(objects int, log io.Writer) (*faultSources, error) {
	host, err := newGitHost(log)
	if err != nil {
		return nil, err
	}
	s := &faultSources{objects: objects, log: log, host: host, latest: map[string]int{}, faulted: map[string]int{}, undo: map[string]func(){}}
	s.password, s.token = secretWord(), secretWord()
	err = host.try(func() {
		s.git = gitserver.New(host)
		s.git.RequireBasicAuth("soak", s.password)
		s.repo = s.git.Repo(host, faultsGitRepo)
		s.registry = ociregistry.New(host)
		s.registry.RequireBasicAuth("soak", s.password)
		s.helm = helmrepo.NewRepo(host, helmrepo.WithBasicAuth("soak", s.password))
	})
	if err != nil {
		return nil, fmt.Errorf("serve the sources: %w", err)
	}
	s.infrahub = infrahubtest.New(infrahubtest.Options{Token: s.token})
	return s, nil
}

// secretWord is a credential of 128 random bits, in hex.
func secretWord() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// credentials are what no log may hold: the password and the token as they are, in
// base64 (a Secret's data), and the Authorization header of basic auth.
func (s *faultSources) credentials() []string {
	b64 := base64.StdEncoding.EncodeToString
	return []string{s.password, s.token, b64([]byte(s.password)), b64([]byte(s.token)), b64([]byte("soak:" + s.password))}
}

func (s *faultSources) close() {
	s.mu.Lock()
	for _, undo := range s.undo {
		undo()
	}
	s.mu.Unlock()
	s.infrahub.Close()
	if err := s.host.close(); err != nil {
		fmt.Fprintf(s.log, "  %v\n", err)
	}
}

// faultsSecretNames are the sources' credentials Secrets.
var faultsSecretNames = []string{"soak-git", "soak-oci", "soak-helm", "soak-infrahub"}

// createSecrets creates each source's credentials Secret, allowed to its URL alone.
func (s *faultSources) createSecrets(ctx context.Context, hub client.Client) error {
	registry := "oci://" + s.registry.Host()
	for name, allowed := range map[string]struct {
		url  string
		data map[string]string
	}{
		"soak-git":      {s.git.URL(), map[string]string{"username": "soak", "password": s.password}},
		"soak-oci":      {registry, map[string]string{"username": "soak", "password": s.password}},
		"soak-helm":     {s.helm.URL(), map[string]string{"username": "soak", "password": s.password}},
		"soak-infrahub": {s.infrahub.URL(), map[string]string{"apiToken": s.token}},
	} {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
			Annotations: map[string]string{vidrav1alpha1.AllowedURLsAnnotation: allowed.url}}, StringData: allowed.data}
		if err := hub.Create(ctx, secret); err != nil {
			return fmt.Errorf("create Secret %s: %w", name, err)
		}
	}
	return nil
}

// manifest is revision k of kind's bundle: the sync's own ConfigMaps, each naming the
// revision, and the shared one, the same in every sharing bundle.
func (s *faultSources) manifest(kind string, k int) string {
	docs := make([]string, 0, s.objects+1)
	for i := range s.objects {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s-%d\ndata:\n  revision: \"%d\"\n", kind, i, k))
	}
	for _, sharing := range sharingKinds {
		if sharing == kind {
			docs = append(docs, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: "+faultsSharedName+"\ndata:\n  shared: \"true\"\n")
		}
	}
	return strings.Join(docs, "---\n")
}

// push gives kind's source its next revision and returns its number.
func (s *faultSources) push(kind string) (int, error) {
	s.mu.Lock()
	k := s.latest[kind] + 1
	clusters := s.clusters
	s.mu.Unlock()
	manifest := s.manifest(kind, k)
	err := s.host.try(func() {
		switch kind {
		case "infrahub":
			arts := make([]infrahubtest.Artifact, 0, len(clusters))
			for _, c := range clusters {
				arts = append(arts, infrahubtest.Artifact{ID: "soak-" + c, Name: "soak", Content: manifest,
					TargetID: "node-" + c, TargetLabel: c, TargetKind: "InfraSite", DefinitionID: "def-soak", DefinitionName: "soak"})
			}
			s.infrahub.Put("main", arts...)
		case "git":
			s.repo.Commit(s.host, "main", map[string]string{"deploy/bundle.yaml": manifest}, fmt.Sprintf("revision %d", k))
		case "oci":
			s.registry.Push(s.host, faultsOCIRepo, "latest", map[string]string{"bundle.yaml": manifest})
		case "helm":
			s.helm.Add(helmrepo.ChartWith(s.host, faultsChart, fmt.Sprintf("1.0.%d", k), map[string]string{"templates/controller.yaml": manifest}))
		}
	})
	if err != nil {
		return 0, fmt.Errorf("push revision %d of %s: %w", k, kind, err)
	}
	s.mu.Lock()
	s.latest[kind] = k
	s.mu.Unlock()
	return k, nil
}

// revisions are the revision each kind is at.
func (s *faultSources) revisions() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.latest {
		out[k] = v
	}
	return out
}

// fail makes kind's source fail or hang until as many recover calls.
func (s *faultSources) fail(kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faulted[kind]++
	if s.faulted[kind] > 1 {
		return
	}
	switch kind {
	case "infrahub":
		s.infrahub.SetFault(infrahubtest.Fault{Status: 503, Message: "the soak's fault"})
		s.undo[kind] = func() { s.infrahub.SetFault(infrahubtest.Fault{}) }
	case "git":
		s.undo[kind] = s.git.Hold(s.host)
	case "oci":
		s.registry.CutBlobs(faultsOCIRepo, 16)
		s.undo[kind] = func() { s.registry.CutBlobs(faultsOCIRepo, 0) }
	default:
		s.faulted[kind]--
	}
}

func (s *faultSources) recover(kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faulted[kind] == 0 {
		return
	}
	s.faulted[kind]--
	if s.faulted[kind] == 0 && s.undo[kind] != nil {
		s.undo[kind]()
		delete(s.undo, kind)
	}
}

// faultedKinds are the sources the schedule makes fail: Helm's double has no fault of
// its own to undo.
var faultedKinds = []string{"infrahub", "git", "oci"}

// createSyncs pushes every source's first revision and creates a sync of each: to every
// cluster of the phase, the Git sync wave by wave.
func (s *faultSources) createSyncs(ctx context.Context, hub client.Client, clusters []faultsCluster) error {
	s.mu.Lock()
	for _, c := range clusters {
		s.clusters = append(s.clusters, c.name)
	}
	s.mu.Unlock()
	for _, kind := range sourceKinds {
		if _, err := s.push(kind); err != nil {
			return err
		}
	}
	interval := &metav1.Duration{Duration: faultsSyncSeconds * time.Second}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{faultsLabel: "true"}}
	dest := vidrav1alpha1.SyncDestination{Destination: vidrav1alpha1.Destination{Namespace: faultsNamespace, ReconcileOnEvents: true}, ClusterSelector: selector}
	options := vidrav1alpha1.SyncOptions{Destination: dest, Interval: interval}
	waves := options
	maxUnavailable := intstr.FromInt32(3)
	waves.Rollout = &vidrav1alpha1.RolloutSpec{
		Strategy: vidrav1alpha1.RolloutProgressive,
		Waves: []vidrav1alpha1.RolloutWave{
			{Name: "canary", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{faultsRingLabel: "canary"}}},
			{Name: "main", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{faultsRingLabel: "main"}}},
		},
		MaxUnavailable: &maxUnavailable,
		// Longer than any fault: a cluster cut off for a while is waited for, not failed.
		HealthTimeout: &metav1.Duration{Duration: 10 * time.Minute},
	}
	meta := func(kind string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: faultsSyncPrefix + kind, Annotations: map[string]string{
			vidrav1alpha1.RequestedByAnnotation: "default", vidrav1alpha1.RequestedByGroupsAnnotation: "system:masters"}}
	}
	ref := func(name string) *vidrav1alpha1.LocalSecretReference {
		return &vidrav1alpha1.LocalSecretReference{Name: name}
	}
	objects := []client.Object{
		&vidrav1alpha1.InfrahubSync{ObjectMeta: meta("infrahub"), Spec: vidrav1alpha1.InfrahubSyncSpec{
			Source: vidrav1alpha1.InfrahubSyncSource{InfrahubAPIURL: s.infrahub.URL(), InsecureAllowHTTP: true, ArtefactName: "soak",
				CredentialsSecretRef: &vidrav1alpha1.SecretReference{Namespace: namespace, Name: "soak-infrahub"}},
			Destination: vidrav1alpha1.InfrahubSyncDestination{Destination: dest.Destination, ClusterFromTarget: true},
			Interval:    interval,
		}},
		&vidrav1alpha1.GitSync{ObjectMeta: meta("git"), Spec: vidrav1alpha1.GitSyncSpec{Source: vidrav1alpha1.GitSource{
			URL: s.repo.URL(), Ref: &vidrav1alpha1.GitRef{Branch: "main"}, Path: "deploy", SecretRef: ref("soak-git"), InsecureAllowHTTP: true,
		}, SyncOptions: waves}},
		&vidrav1alpha1.OCISync{ObjectMeta: meta("oci"), Spec: vidrav1alpha1.OCISyncSpec{Source: vidrav1alpha1.OCISource{
			URL: s.registry.URL(faultsOCIRepo), Ref: &vidrav1alpha1.OCIRef{Tag: "latest"}, SecretRef: ref("soak-oci"), InsecureAllowHTTP: true,
		}, SyncOptions: options}},
		&vidrav1alpha1.HelmSync{ObjectMeta: meta("helm"), Spec: vidrav1alpha1.HelmSyncSpec{Source: vidrav1alpha1.HelmSource{
			RepoURL: s.helm.URL(), Chart: faultsChart, SecretRef: ref("soak-helm"), InsecureAllowHTTP: true,
		}, Release: vidrav1alpha1.HelmRelease{Name: "soak"}, SyncOptions: options}},
	}
	for _, obj := range objects {
		if err := hub.Create(ctx, obj); err != nil {
			return fmt.Errorf("create %s: %w", obj.GetName(), err)
		}
	}
	return nil
}
