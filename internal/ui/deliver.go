package ui

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/policy"
)

// deliverTTL is how long an answer is kept: the fleet page is rendered again on every
// change of the fleet, and need not ask the hub each time; a new RoleBinding shows
// within it.
const deliverTTL = 30 * time.Second

// mayDeliver is whether the caller may deliver to a cluster, as the pages show it.
type mayDeliver struct {
	// Word is yes, no, or unknown when the hub could not be asked.
	Word, Health, Why string
	asked             time.Time
}

// deliverRights asks the hub whether the caller may deliver to a cluster (the verb
// deliver on the VidraCluster's name), and keeps the answers for deliverTTL.
type deliverRights struct {
	client client.Client

	mu      sync.Mutex
	answers map[string]mayDeliver
}

func newDeliverRights(c client.Client) *deliverRights {
	return &deliverRights{client: c, answers: map[string]mayDeliver{}}
}

// of answers for one cluster. The lock is not held while the hub is asked: two pages may
// ask at once, which costs a review, not a wait.
func (d *deliverRights) of(ctx context.Context, cluster string) mayDeliver {
	d.mu.Lock()
	answer, ok := d.answers[cluster]
	d.mu.Unlock()
	if ok && time.Since(answer.asked) < deliverTTL {
		return answer
	}
	answer = d.ask(ctx, cluster)
	if answer.Word == unknown {
		return answer // asked again at the next render
	}
	d.mu.Lock()
	d.answers[cluster] = answer
	d.mu.Unlock()
	return answer
}

// ask is one SelfSubjectAccessReview.
func (d *deliverRights) ask(ctx context.Context, cluster string) mayDeliver {
	status, err := policy.ReviewDeliver(ctx, d.client, nil, cluster)
	if err != nil {
		return mayDeliver{Word: unknown, Health: unknown, Why: fmt.Sprintf("could not ask the hub: %v", err)}
	}
	why := strings.TrimSpace(status.Reason)
	if status.Allowed && !status.Denied {
		return mayDeliver{Word: "yes", Health: healthy, Why: why, asked: time.Now()}
	}
	if why == "" {
		why = fmt.Sprintf("delivering to %s takes the verb %s on vidraclusters.%s named %s, or on every vidracluster",
			cluster, vidrav1alpha1.DeliverVerb, vidrav1alpha1.GroupVersion.Group, cluster)
	}
	return mayDeliver{Word: "no", Health: failing, Why: why, asked: time.Now()}
}
