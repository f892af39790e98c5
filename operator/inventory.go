package operator

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/vidra-operator/vidra/controllers/inventory"
)

// ValidateInventory refuses an inventory Vidra does not read, a namespace that is not one,
// and an inventory without namespaces to read it from.
func ValidateInventory(o *Options) error {
	known := []string{inventory.ClusterAPIInventory, inventory.ClusterProfileInventory, inventory.ArgoCDInventory}
	for i, inv := range o.ClusterInventory {
		if !slices.Contains(known, inv) {
			return fmt.Errorf("--cluster-inventory=%s: want one of %s", inv, strings.Join(known, ", "))
		}
		if slices.Contains(o.ClusterInventory[:i], inv) {
			return fmt.Errorf("--cluster-inventory names %s twice", inv)
		}
	}
	for _, ns := range o.ClusterInventoryNamespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("--cluster-inventory-namespaces: %q is not a namespace: %v", ns, errs)
		}
	}
	if len(o.ClusterInventory) > 0 && len(o.ClusterInventoryNamespaces) == 0 {
		return fmt.Errorf("--cluster-inventory=%v reads no namespace: list them in --cluster-inventory-namespaces", o.ClusterInventory)
	}
	if ns := o.PublishClusterProfiles; ns != "" && (len(validation.IsDNS1123Label(ns)) > 0 || o.ClusterProvider == ProviderNone) {
		return fmt.Errorf("--publish-cluster-profiles=%s: want a namespace, and --cluster-provider=%s", ns, ProviderSecret)
	}
	if len(o.ClusterInventory) > 0 && o.ClusterProvider == ProviderNone {
		return fmt.Errorf("--cluster-inventory enrolls clusters: it needs --cluster-provider=%s", ProviderSecret)
	}
	return nil
}

// setupInventory registers the inventories the options name, on the hub.
func (o *Operator) setupInventory(opts Options) error {
	local := o.Manager.GetLocalManager()
	e := &inventory.Enroller{
		Hub: local.GetClient(), Reader: local.GetAPIReader(), Namespace: opts.ClusterSecretNamespace,
		Policy: opts.KubeconfigPolicy, Scheme: local.GetScheme(),
	}
	setup := map[string]func(manager.Manager, []string, *inventory.Enroller) error{
		inventory.ClusterAPIInventory:     inventory.SetupClusterAPI,
		inventory.ClusterProfileInventory: inventory.SetupClusterProfile,
		inventory.ArgoCDInventory:         inventory.SetupArgoCD,
	}
	for _, inv := range opts.ClusterInventory {
		if err := setup[inv](local, opts.ClusterInventoryNamespaces, e); err != nil {
			return err
		}
	}
	if opts.PublishClusterProfiles != "" {
		return inventory.SetupPublisher(local, opts.PublishClusterProfiles)
	}
	return nil
}
