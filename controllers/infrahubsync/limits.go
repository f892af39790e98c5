package infrahubsync

import (
	"fmt"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/syncs"
	"github.com/vidra-operator/vidra/internal/source/infrahub"
)

// overLimit is the failure of a sync that went over one of the operator's bounds, which
// stalls it. They are the operator's, not the sync's: a tenant of a shared hub cannot
// raise its own, so the message says which bound it is, and how an administrator raises
// it.
func overLimit(lim *infrahub.LimitError, message string) error {
	return &syncs.Failure{Reason: vidrav1alpha1.ReasonLimitExceeded, Stalled: true,
		Err: fmt.Errorf("%s. An administrator raises this bound with the operator's %s", message, raiseHint(lim.Limit))}
}

// raiseHint names the flag, and the chart value, that set a bound.
func raiseHint(l infrahub.Limit) string {
	switch l {
	case infrahub.LimitArtifacts:
		return "--infrahub-sync-max-artifacts (Helm value infrahub.syncMaxArtifacts)"
	case infrahub.LimitBytes:
		return "--infrahub-sync-max-bytes (Helm value infrahub.syncMaxBytes)"
	case infrahub.LimitMemory:
		return "--infrahub-memory-budget (Helm value infrahub.memoryBudget; give the pod the memory too)"
	case infrahub.LimitTime:
		return "--infrahub-sync-timeout (Helm value infrahub.syncTimeout)"
	}
	return "settings"
}
