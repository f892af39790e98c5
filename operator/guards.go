package operator

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/vidra-operator/vidra/internal/fleet/admissionguard"
)

// guardsCheckInterval is how often the admission policies are looked at for the log; the
// VidraResources relying on them follow their changes through watches.
const guardsCheckInterval = 30 * time.Second

// guardsReport says in the log, at start and whenever it changes, which of the admission
// policies that record and check who asked are not in force, so an admin learns of a
// deleted binding without waiting for a refused bundle.
type guardsReport struct {
	guards *admissionguard.Checker
	log    logr.Logger
}

// NeedLeaderElection: every replica reports what it sees.
func (g guardsReport) NeedLeaderElection() bool { return false }

// Start reports until ctx ends.
func (g guardsReport) Start(ctx context.Context) error {
	var last []string
	first := true
	ticker := time.NewTicker(guardsCheckInterval)
	defer ticker.Stop()
	for {
		missing, err := g.guards.Missing(ctx)
		switch {
		case err != nil:
			g.log.Error(err, "cannot tell whether the admission policies are in force")
		case len(missing) > 0 && (first || !slices.Equal(missing, last)):
			g.log.Error(nil, "admission policies not in force: syncs, and VidraResources a person wrote, are refused until they are",
				"missing", missing)
		case len(missing) == 0 && (first || len(last) > 0):
			g.log.Info("admission policies in force", "policies", len(g.guards.Required))
		}
		if err == nil {
			last, first = missing, false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// admissionGuards is the checker of the hub's admission policies the chart lists
// (--required-admission-policies), which the VidraResource and sync controllers share,
// and which the log reports on; nil when none is required, or on a pull member's agent.
func admissionGuards(local manager.Manager, opts Options) (*admissionguard.Checker, error) {
	required, err := admissionguard.Parse(opts.RequiredAdmissionPolicies)
	if err != nil {
		return nil, fmt.Errorf("required admission policies: %w", err)
	}
	if len(required) == 0 || opts.agent != nil {
		return nil, nil
	}
	guards := &admissionguard.Checker{Reader: local.GetClient(), Required: required, Store: &admissionguard.GapStore{
		Reader: local.GetAPIReader(), Writer: local.GetClient(), Namespace: opts.LeaderElectionNamespace}}
	log := opts.Logger.WithName("admission-policies")
	if err := local.Add(guardsReport{guards: guards, log: log}); err != nil {
		return nil, fmt.Errorf("report admission policies: %w", err)
	}
	// What was written while a policy was not in force is distrusted after a restart too.
	if err := local.Add(admissionguard.Recorder{Checker: guards, Log: log}); err != nil {
		return nil, fmt.Errorf("record when the admission policies are not in force: %w", err)
	}
	return guards, nil
}
