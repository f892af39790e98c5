package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// openClusters opens a front for each of the phase's clusters, spread over the members
// round robin as the fleet phase's are, each in a ring of -variables-sets, and creates
// the namespace the bundle goes to on every member they front.
func (v *variablesRun) openClusters(ctx context.Context) error {
	for i := range v.VariablesClusters {
		c, err := v.fronts.openCluster(ctx, v.members[i%len(v.members)], i, fmt.Sprintf("%s%04d", variablesClusterPrefix, i))
		if err != nil {
			return err
		}
		v.clusters = append(v.clusters, variablesCluster{fleetCluster: c, ring: fmt.Sprintf("r%d", i%v.VariablesSets)})
	}
	return forEach(ctx, v.fronted(), func(m *testfleet.Cluster) error {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: variablesNamespace}}
		if err := client.IgnoreAlreadyExists(m.Client.Create(ctx, ns)); err != nil {
			return fmt.Errorf("create namespace %s on %s: %w", variablesNamespace, m.Name, err)
		}
		return nil
	})
}

// fronted are the members the phase's clusters front.
func (v *variablesRun) fronted() []*testfleet.Cluster {
	return v.members[:min(v.VariablesClusters, len(v.members))]
}

// enroll creates each cluster's enrollment Secret, labeled with its ring, confined to
// the bundle's namespace, and waits until every cluster is Engaged.
func (v *variablesRun) enroll(ctx context.Context) error {
	secrets := make([]*corev1.Secret, 0, len(v.clusters))
	for _, c := range v.clusters {
		secrets = append(secrets, enrollmentSecret(c.fleetCluster, variablesLabel, variablesNamespace, map[string]string{"ring": c.ring}))
	}
	return enrollLabeled(ctx, v.fleet.Hub.Client, secrets, variablesLabel, "the variables phase's")
}

// enrollmentSecret enrolls the cluster c fronts, labeled with label (and more labels),
// its delivery confined to the namespace allowed.
func enrollmentSecret(c fleetCluster, label, allowed string, labels map[string]string) *corev1.Secret {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: c.name, Namespace: namespace,
			Labels:      map[string]string{vidrav1alpha1.ClusterLabel: c.name, label: "true"},
			Annotations: map[string]string{vidrav1alpha1.AllowedNamespacesAnnotation: allowed},
		},
		Data: map[string][]byte{vidrav1alpha1.KubeconfigKey: c.kubeconfig},
	}
	maps.Copy(secret.Labels, labels)
	return secret
}

// enrollLabeled creates the enrollment Secrets, each carrying label, and waits until
// as many VidraClusters of that label are Engaged.
func enrollLabeled(ctx context.Context, hub client.Client, secrets []*corev1.Secret, label, whose string) error {
	err := forEach(ctx, secrets, func(secret *corev1.Secret) error {
		if err := hub.Create(ctx, secret); err != nil {
			return fmt.Errorf("create enrollment Secret %s: %w", secret.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	what := fmt.Sprintf("%s %d clusters Engaged", whose, len(secrets))
	return testfleet.WaitFor(ctx, 500*time.Millisecond, 10*time.Minute, what, func() (bool, error) {
		clusters, err := labeledClusters(ctx, hub, label)
		engaged := 0
		for _, vc := range clusters {
			if vc.Status.Phase == vidrav1alpha1.ClusterEngaged {
				engaged++
			}
		}
		return engaged == len(secrets), err
	})
}

// labeledClusters are the VidraClusters of enrollment Secrets labeled with label, which
// they carry.
func labeledClusters(ctx context.Context, hub client.Client, label string) ([]vidrav1alpha1.VidraCluster, error) {
	var list vidrav1alpha1.VidraClusterList
	if err := hub.List(ctx, &list, client.MatchingLabels{label: "true"}); err != nil {
		return nil, fmt.Errorf("list VidraClusters: %w", err)
	}
	return list.Items, nil
}

// clean removes what the phase set up, each step whether the one before failed or not:
// the GitSync and its VidraResources, then the enrollment Secrets and their clusters
// (disengaged through the fronts, still open), the namespace on the members, the fronts
// and the Git server.
func (v *variablesRun) clean(ctx context.Context) error {
	started := time.Now()
	errs := []error{v.removeSync(ctx)}
	errs = append(errs, v.unenroll(ctx))
	errs = append(errs, v.removeNamespace(ctx))
	errs = append(errs, v.fronts.close())
	if v.git != nil {
		errs = append(errs, v.git.close())
	}
	fmt.Fprintf(v.log, "  cleared in %s\n", since(started))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("clear the variables phase: %w", err)
	}
	return nil
}

// removeSync deletes the GitSync, then its VidraResources, as the garbage collector would
// through their owner references (the bench's hub runs none), and waits until the
// operator has let every one go.
func (v *variablesRun) removeSync(ctx context.Context) error {
	return v.removeSyncNamed(ctx, variablesSyncName)
}

func (v *variablesRun) removeSyncNamed(ctx context.Context, name string) error {
	return removeSync(ctx, v.fleet.Hub.Client, vidrav1alpha1.LookupSyncKind("GitSync"), name)
}

// removeSync deletes a sync, waits until it is gone, then deletes its VidraResources
// (the bench's hub runs no garbage collector to follow their owner references) and waits
// until the operator has let every one go.
func removeSync(ctx context.Context, hub client.Client, kind vidrav1alpha1.SyncKind, name string) error {
	sync := kind.New()
	sync.SetName(name)
	if err := client.IgnoreNotFound(hub.Delete(ctx, sync)); err != nil {
		return fmt.Errorf("delete %s %s: %w", kind.Kind, name, err)
	}
	// Gone first, so that it makes none of them again.
	err := testfleet.WaitFor(ctx, 100*time.Millisecond, time.Minute, kind.Kind+" "+name+" gone", func() (bool, error) {
		err := hub.Get(ctx, client.ObjectKey{Name: name}, sync)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		return err
	}
	ofSync := client.MatchingLabels{kind.Label: name}
	if err := hub.DeleteAllOf(ctx, &vidrav1alpha1.VidraResource{}, ofSync); err != nil {
		return fmt.Errorf("delete the VidraResources of %s %s: %w", kind.Kind, name, err)
	}
	return testfleet.WaitFor(ctx, 500*time.Millisecond, 5*time.Minute, "the VidraResources of "+kind.Kind+" "+name+" gone", func() (bool, error) {
		var list vidrav1alpha1.VidraResourceList
		err := hub.List(ctx, &list, ofSync, client.Limit(1))
		return err == nil && len(list.Items) == 0, err
	})
}

// unenroll deletes the enrollment Secrets and waits until their VidraClusters are gone.
func (v *variablesRun) unenroll(ctx context.Context) error {
	return unenrollLabeled(ctx, v.fleet.Hub.Client, variablesLabel, "the variables phase's")
}

// unenrollLabeled deletes the enrollment Secrets labeled with label and waits until
// their VidraClusters are gone.
func unenrollLabeled(ctx context.Context, hub client.Client, label, whose string) error {
	err := hub.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(namespace), client.MatchingLabels{label: "true"})
	if err != nil {
		return fmt.Errorf("delete the enrollment Secrets: %w", err)
	}
	return testfleet.WaitFor(ctx, 500*time.Millisecond, 5*time.Minute, whose+" VidraClusters gone", func() (bool, error) {
		clusters, err := labeledClusters(ctx, hub, label)
		return err == nil && len(clusters) == 0, err
	})
}

// removeNamespace deletes the bundle's namespace on the members.
func (v *variablesRun) removeNamespace(ctx context.Context) error {
	return forEach(ctx, v.fronted(), func(m *testfleet.Cluster) error {
		return removeNamespace(ctx, m, variablesNamespace)
	})
}

// removeNamespace deletes a namespace on a member. Members run no namespace controller
// (the bench starts none), so it is then finalized as that controller would once it is
// empty; one that still holds ConfigMaps (what the bench delivers) is left alone, with
// an error: finalized, it would orphan them.
func removeNamespace(ctx context.Context, m *testfleet.Cluster, name string) error {
	var held corev1.ConfigMapList
	if err := m.Client.List(ctx, &held, client.InNamespace(name)); err != nil {
		return fmt.Errorf("list the ConfigMaps of namespace %s on %s: %w", name, m.Name, err)
	}
	if n := len(slices.DeleteFunc(held.Items, func(cm corev1.ConfigMap) bool { return cm.Name == "kube-root-ca.crt" })); n > 0 {
		return fmt.Errorf("namespace %s on %s still holds %d ConfigMaps: not removed", name, m.Name, n)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	err := m.Client.Delete(ctx, ns)
	if err == nil {
		err = m.Client.Get(ctx, client.ObjectKeyFromObject(ns), ns)
	}
	if err == nil {
		ns.Spec.Finalizers = nil
		err = m.Client.SubResource("finalize").Update(ctx, ns)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove namespace %s on %s: %w", name, m.Name, err)
	}
	return nil
}
