package operator

import (
	"fmt"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vidra-operator/vidra/controllers/hooks"
	"github.com/vidra-operator/vidra/controllers/infrahubsync"
	"github.com/vidra-operator/vidra/controllers/sourcesync"
	"github.com/vidra-operator/vidra/controllers/syncs"
	"github.com/vidra-operator/vidra/controllers/vidraresource"
	"github.com/vidra-operator/vidra/controllers/vmrollout"
	"github.com/vidra-operator/vidra/internal/fleet/fleetmetrics"
)

// operatorMetrics are the controllers' metrics. They are registered in one place, so that
// what the operator exports (and what the chart's dashboard and alerts may use) is known.
// The cluster provider registers its own (providers/secret).
type operatorMetrics struct {
	resources *vidraresource.Metrics
	syncs     *infrahubsync.Metrics
	sources   *sourcesync.Metrics
	vms       *vmrollout.Metrics
	hooks     *hooks.Metrics
	previews  *syncs.PreviewMetrics
}

// registerMetrics registers the controllers' metrics and the fleet's state, read from
// the hub through hub, with reg; an agent's fleet is its VidraResources alone.
func registerMetrics(reg prometheus.Registerer, hub client.Reader, agent bool, log logr.Logger) (operatorMetrics, error) {
	var m operatorMetrics
	var err error
	if m.resources, err = vidraresource.NewMetrics(reg); err != nil {
		return m, err
	}
	if m.syncs, err = infrahubsync.NewMetrics(reg); err != nil {
		return m, err
	}
	if m.sources, err = sourcesync.NewMetrics(reg); err != nil {
		return m, err
	}
	if m.vms, err = vmrollout.NewMetrics(reg); err != nil {
		return m, err
	}
	if m.hooks, err = hooks.NewMetrics(reg); err != nil {
		return m, err
	}
	if m.previews, err = syncs.NewPreviewMetrics(reg); err != nil {
		return m, err
	}
	fleet := fleetmetrics.New(hub, log)
	if agent {
		fleet = fleet.ResourcesOnly()
	}
	if err := reg.Register(fleet); err != nil {
		return m, fmt.Errorf("register fleet metrics: %w", err)
	}
	return m, nil
}
