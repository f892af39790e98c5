package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// Flux's kinds, read and written as unstructured objects: the bench does not link
// Flux's API modules.
var (
	gitRepositoryKind = schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "GitRepository"}
	kustomizationKind = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}
)

// fluxRequestedAt is the annotation that asks a Flux object for a reconcile now, as the
// flux CLI's reconcile and a notification-controller Receiver set it.
const fluxRequestedAt = "reconcile.fluxcd.io/requestedAt"

// fluxProcess is a running Flux controller; exited is closed once it has exited.
type fluxProcess struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
}

// startFlux starts each controller against the hub with its default flags but its
// addresses (two controllers on one host) and storage path, logging to <dir>/<name>.log,
// and waits until each answers its readiness probe.
func (race *fluxRace) startFlux(ctx context.Context) error {
	kubeconfig, err := race.fleet.Hub.WriteKubeconfig(race.dir)
	if err != nil {
		return err
	}
	for _, b := range race.fluxBuilds {
		addrs, err := freeAddresses(3)
		if err != nil {
			return err
		}
		metrics, health, storage := addrs[0], addrs[1], addrs[2]
		args := []string{"--metrics-addr=" + metrics, "--health-addr=" + health}
		if b.name == "source-controller" {
			dir := filepath.Join(race.dir, "flux-storage")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			args = append(args, "--storage-path="+dir, "--storage-addr="+storage, "--storage-adv-addr="+storage)
		}
		p, err := race.startFluxProcess(b, kubeconfig, args)
		if err != nil {
			return err
		}
		if err := p.waitReady(ctx, health); err != nil {
			return err
		}
	}
	return nil
}

// startFluxProcess starts one controller with args, logging to <dir>/<name>.log.
func (race *fluxRace) startFluxProcess(b fluxBuild, kubeconfig string, args []string) (*fluxProcess, error) {
	logFile, err := os.Create(filepath.Join(race.dir, b.name+".log"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = logFile.Close() }() // the child holds its own descriptor
	cmd := exec.Command(b.binary, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "RUNTIME_NAMESPACE="+raceFluxNamespace)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", b.name, err)
	}
	p := &fluxProcess{name: b.name, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	race.flux = append(race.flux, p)
	fmt.Fprintf(race.log, "%s log: %s\n", b.name, logFile.Name())
	return p, nil
}

// waitReady waits until the controller answers its readiness probe at health, or says
// where its log is if it exits first.
func (p *fluxProcess) waitReady(ctx context.Context, health string) error {
	return testfleet.WaitFor(ctx, 100*time.Millisecond, time.Minute, p.name+" ready", func() (bool, error) {
		select {
		case <-p.exited:
			return false, fmt.Errorf("%s exited (%v); its log says why", p.name, p.cmd.ProcessState)
		default:
		}
		resp, err := httpGet(ctx, "http://"+health+"/readyz")
		if err != nil {
			return false, nil // not listening yet
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

func freeAddresses(n int) ([]string, error) {
	addrs := make([]string, 0, n)
	for range n {
		addr, err := testfleet.FreeLocalAddress()
		if err != nil {
			return nil, err
		}
		addrs = append(addrs, addr)
	}
	return addrs, nil
}

// stopFlux stops the controllers, as Kubernetes stops a pod.
func (race *fluxRace) stopFlux() {
	for _, p := range race.flux {
		stopProcess(race.log, p.name, p.cmd, p.exited)
	}
}

// deliverWithFlux creates, for each cluster, the Secret of its kubeconfig, a
// GitRepository of the repository and a Kustomization of its overlay into the cluster's
// namespace, each at an interval of an hour (the bench's requests alone reconcile them),
// then waits until every Kustomization is Ready at revision.
func (race *fluxRace) deliverWithFlux(ctx context.Context, revision string) error {
	race.fluxObjects = true
	hub := race.fleet.Hub.Client
	err := forEach(ctx, race.clusters, func(c fleetCluster) error {
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: c.name + "-kubeconfig", Namespace: raceFluxNamespace, Labels: map[string]string{raceLabel: "true"}},
			Data:       map[string][]byte{"value": c.kubeconfig},
		}
		repo := fluxObject(gitRepositoryKind, c.name, map[string]any{
			"url": race.repo.URL(), "interval": "1h", "ref": map[string]any{"branch": raceBranch},
		})
		kustomization := fluxObject(kustomizationKind, c.name, map[string]any{
			"interval": "1h", "prune": true, "path": "./overlay", "targetNamespace": fluxNamespaceOf(c),
			"sourceRef":  map[string]any{"kind": gitRepositoryKind.Kind, "name": c.name},
			"kubeConfig": map[string]any{"secretRef": map[string]any{"name": secret.Name}},
		})
		for _, obj := range []client.Object{secret, repo, kustomization} {
			if err := hub.Create(ctx, obj); err != nil {
				return fmt.Errorf("create %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return race.waitFluxReady(ctx, revision)
}

// fluxObject is a Flux object of the phase's namespace.
func fluxObject(gvk schema.GroupVersionKind, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(raceFluxNamespace)
	u.SetName(name)
	return u
}

// requestFlux asks every GitRepository for a reconcile now: each fetches the new commit,
// and its Kustomization follows its new artifact.
func (race *fluxRace) requestFlux(ctx context.Context) error {
	patch := requestedAtPatch(fluxRequestedAt)
	return forEach(ctx, race.clusters, func(c fleetCluster) error {
		if err := race.fleet.Hub.Client.Patch(ctx, fluxObject(gitRepositoryKind, c.name, nil), patch); err != nil {
			return fmt.Errorf("request a reconcile of GitRepository %s: %w", c.name, err)
		}
		return nil
	})
}

// waitFluxReady waits until every cluster's Kustomization is Ready at revision; if it
// times out, the error says why one that is not is not.
func (race *fluxRace) waitFluxReady(ctx context.Context, revision string) error {
	var notReady string
	what := fmt.Sprintf("Flux's %d Kustomizations Ready at %s", len(race.clusters), revision)
	err := testfleet.WaitFor(ctx, raceEvery, 10*time.Minute, what, func() (bool, error) {
		items, err := listFlux(ctx, race.fleet.Hub.Client, kustomizationKind)
		if err != nil {
			return false, err
		}
		ready := 0
		for _, k := range items {
			if why := fluxNotReady(k, revision); why != "" {
				notReady = k.GetName() + ": " + why
				continue
			}
			ready++
		}
		return ready == len(race.clusters), nil
	})
	if err != nil && notReady != "" {
		return fmt.Errorf("%w (Kustomization %s)", err, notReady)
	}
	return err
}

// fluxNotReady says why a Kustomization is not Ready at revision for its generation, or
// "" when it is.
func fluxNotReady(k unstructured.Unstructured, revision string) string {
	var status struct {
		ObservedGeneration  int64              `json:"observedGeneration"`
		LastAppliedRevision string             `json:"lastAppliedRevision"`
		Conditions          []metav1.Condition `json:"conditions"`
	}
	raw, _, _ := unstructured.NestedMap(k.Object, "status")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &status); err != nil {
		return "status: " + err.Error()
	}
	ready := meta.FindStatusCondition(status.Conditions, "Ready")
	// Ready False first: its controller sets observedGeneration only once Ready.
	switch {
	case ready == nil:
		return "not reconciled yet"
	case ready.Status != metav1.ConditionTrue:
		return fmt.Sprintf("Ready %s, %s: %s", ready.Status, ready.Reason, ready.Message)
	case status.ObservedGeneration != k.GetGeneration():
		return "not reconciled yet"
	case status.LastAppliedRevision != revision:
		return "applied " + status.LastAppliedRevision
	}
	return ""
}

// removeFluxObjects deletes the Kustomizations, which their controller prunes from the
// clusters before it lets them go, then the GitRepositories and the kubeconfig Secrets;
// each step whether the one before failed or not.
func (race *fluxRace) removeFluxObjects(ctx context.Context) error {
	hub := race.fleet.Hub.Client
	var errs []error
	for _, gvk := range []schema.GroupVersionKind{kustomizationKind, gitRepositoryKind} {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(gvk)
		if err := hub.DeleteAllOf(ctx, obj, client.InNamespace(raceFluxNamespace)); err != nil {
			errs = append(errs, fmt.Errorf("delete the %ss: %w", gvk.Kind, err))
			continue
		}
		err := testfleet.WaitFor(ctx, 500*time.Millisecond, 5*time.Minute, "the "+gvk.Kind+"s gone", func() (bool, error) {
			items, err := listFlux(ctx, hub, gvk)
			return err == nil && len(items) == 0, err
		})
		errs = append(errs, err)
	}
	err := hub.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(raceFluxNamespace), client.MatchingLabels{raceLabel: "true"})
	if err != nil {
		errs = append(errs, fmt.Errorf("delete the kubeconfig Secrets: %w", err))
	}
	return errors.Join(errs...)
}

// dropFluxLeftovers removes the finalizers of Flux objects left once the controllers
// have stopped, which nothing would remove any more, so that the hub lets them go.
func (race *fluxRace) dropFluxLeftovers(ctx context.Context) error {
	hub := race.fleet.Hub.Client
	var errs []error
	for _, gvk := range []schema.GroupVersionKind{kustomizationKind, gitRepositoryKind} {
		items, err := listFlux(ctx, hub, gvk)
		errs = append(errs, err)
		for _, item := range items {
			patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
			errs = append(errs, client.IgnoreNotFound(hub.Patch(ctx, &item, patch)))
			errs = append(errs, client.IgnoreNotFound(hub.Delete(ctx, &item)))
		}
	}
	return errors.Join(errs...)
}

// listFlux lists the Flux objects of a kind in the phase's namespace.
func listFlux(ctx context.Context, hub client.Client, gvk schema.GroupVersionKind) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := hub.List(ctx, list, client.InNamespace(raceFluxNamespace)); err != nil {
		return nil, fmt.Errorf("list the %ss: %w", gvk.Kind, err)
	}
	return list.Items, nil
}
