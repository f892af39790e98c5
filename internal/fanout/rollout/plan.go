// Package rollout is the pure planner of progressive rollouts: from what the API shows of
// a sync's clusters and its last status, it decides which clusters move to the newest
// content, which fall back to the stable one, and what the status says. It reads and
// writes nothing, so every sync kind shares it, and it is tested without a cluster.
package rollout

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// defaultHealthTimeout applies when spec.rollout.healthTimeout is unset.
const defaultHealthTimeout = 10 * time.Minute

// Cluster is what the planner knows of one cluster of a sync.
type Cluster struct {
	Name   string
	Labels map[string]string
	// Present: the cluster has a VidraResource for every artifact it receives.
	Present bool
	// AtTarget: every one of them holds the newest content; Healthy: and is healthy.
	AtTarget bool
	Healthy  bool
	// Unhealthy says why it is not healthy yet.
	Unhealthy string
	// UpdatedAt is when it was moved to the newest content.
	UpdatedAt time.Time
	// Pinned: a person rolled one of its VidraResources back; the sync leaves it alone.
	Pinned bool
	// Unavailable: not healthy on the content it has now, whichever that is.
	Unavailable bool
	// Failing: unavailable as its own reconcile observed it (not merely waiting for
	// one): it is down whatever the rollout does.
	Failing bool
}

// Move is what the plan does to a cluster's VidraResources.
type Move int

const (
	// ToNewest writes the newest content. The zero Move leaves them as they are.
	ToNewest Move = iota + 1
	// ToStable writes the content of the last revision that completed.
	ToStable
)

// Event is an Event the plan asks for, on the sync.
type Event struct {
	Type, Reason, Note string
}

// Input is everything the planner decides from: it is pure, so that a restarted
// operator, given the same API objects, decides the same.
type Input struct {
	Spec vidrav1alpha1.RolloutSpec
	// Last is the status as last written; Hash identifies the newest content.
	Last vidrav1alpha1.RolloutStatus
	Hash string
	// HasStable: a revision completed before, so there is content to fall back to.
	HasStable bool
	// Resume is the resume-requested-at annotation's value.
	Resume   string
	Now      time.Time
	Clusters []Cluster
}

// Plan is what the planner decided.
type Plan struct {
	Status vidrav1alpha1.RolloutStatus
	// Moves says, by cluster name, which clusters move, and where.
	Moves  map[string]Move
	Events []Event
	// Waves are the results of the waves that ended (completed, failed, rolledback), for
	// the metric.
	Waves   []string
	Requeue time.Duration
	// Completed: the newest revision reached every cluster, healthy; it becomes stable.
	Completed bool
}

// Decide decides which clusters move to the newest content now, which fall back to
// the stable one, and what the status says. Clusters are only ever moved by what the API
// shows of them, so planning twice from the same objects moves nothing twice.
func Decide(in Input) (Plan, error) {
	p := Plan{Status: in.Last, Moves: map[string]Move{}}
	all, err := waves(in.Spec, in.Clusters)
	if err != nil {
		return p, err
	}
	d := &decision{in: in, p: &p, st: &p.Status, all: all, timeout: healthTimeout(in.Spec), now: metav1.NewTime(in.Now)}
	d.startRevision()
	d.resume()
	d.count()
	current := d.currentWave()
	d.holdStable(current)
	switch d.st.Phase {
	case vidrav1alpha1.RolloutCompleted:
		d.keepCompleted()
		return p, nil
	case vidrav1alpha1.RolloutFailed, vidrav1alpha1.RolloutRolledBack:
		return p, nil // until the content changes or a person resumes
	}
	if d.waiting() {
		return p, nil
	}
	d.st.Phase = vidrav1alpha1.RolloutProgressing
	for i := current; i < len(all); i++ {
		if !d.advance(i) {
			return p, nil
		}
	}
	d.complete()
	return p, nil
}

// ContentHash identifies a revision of a sync's content: its items and their checksums.
func ContentHash(checksums map[string]string) string {
	ids := make([]string, 0, len(checksums))
	for id := range checksums {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	h := sha256.New()
	for _, id := range ids {
		fmt.Fprintf(h, "%s=%s\n", id, checksums[id])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
