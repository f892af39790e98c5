package operator

import (
	"fmt"
	"os"

	"github.com/vidra-operator/vidra/controllers/alerts"
	"github.com/vidra-operator/vidra/internal/fleet/credentials"
	"github.com/vidra-operator/vidra/internal/notification"
	"github.com/vidra-operator/vidra/internal/runtime/events"
)

// setupAlerts has the controllers' Events (o.events) passed on to the Alerts that select
// them, by every replica for the Events it records, and tells on each Alert and
// AlertProvider whether it can be used. An agent sends none: its hub does.
func (o *Operator) setupAlerts(opts Options) error {
	local := o.Manager.GetLocalManager()
	plain := local.GetEventRecorder(eventSource)
	o.events = plain
	if opts.agent != nil {
		return nil
	}
	metrics, err := notification.NewMetrics(opts.Metrics)
	if err != nil {
		return err
	}
	gate := credentials.NewGate(local.GetAPIReader(), local.GetClient(), opts.InfrahubSecretNamespace)
	dispatcher := notification.New(notification.Options{
		Hub:          local.GetClient(),
		Gate:         gate,
		Scheme:       local.GetScheme(),
		Recorder:     plain,
		Metrics:      metrics,
		Log:          opts.Logger.WithName("alerts"),
		Controller:   eventSource,
		Instance:     instanceName(opts),
		QueueSize:    opts.AlertQueueSize,
		DedupeWindow: opts.AlertDedupeWindow,
	})
	if err := local.Add(dispatcher); err != nil {
		return fmt.Errorf("add the alerts' dispatcher: %w", err)
	}
	o.events = events.WithNotifier(plain, dispatcher)
	return alerts.SetupWithManager(local,
		&alerts.ProviderReconciler{Hub: local.GetClient(), Gate: gate},
		&alerts.AlertReconciler{Hub: local.GetClient()})
}

// instanceName names this replica in the events it sends: its shard ID, else its host.
func instanceName(opts Options) string {
	if opts.ShardID != "" {
		return opts.ShardID
	}
	host, _ := os.Hostname()
	return host
}
