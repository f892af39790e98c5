package infrahubsync

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// remainingWave names the implicit last wave: the clusters no wave selects.
const remainingWave = "remaining"

// defaultHealthTimeout applies when spec.rollout.healthTimeout is unset.
const defaultHealthTimeout = 10 * time.Minute

// clusterView is what the planner knows of one cluster of a progressive sync.
type clusterView struct {
	name   string
	labels map[string]string
	// present: the cluster has a VidraResource for every artifact it receives.
	present bool
	// atTarget: every one of them holds the newest content; healthy: and is healthy.
	atTarget bool
	healthy  bool
	// unhealthy says why it is not healthy yet.
	unhealthy string
	// updatedAt is when it was moved to the newest content.
	updatedAt time.Time
	// pinned: a person rolled one of its VidraResources back; the sync leaves it alone.
	pinned bool
	// unavailable: not healthy on the content it has now, whichever that is.
	unavailable bool
}

// move is what the plan does to a cluster's VidraResources.
type move int

const (
	// toNewest writes the newest content. The zero move leaves them as they are.
	toNewest move = iota + 1
	// toStable writes the content of the last revision that completed.
	toStable
)

// rolloutEvent is an Event the plan asks for.
type rolloutEvent struct {
	eventType, reason, note string
}

// rolloutInput is everything the planner decides from: it is pure, so that a restarted
// operator, given the same API objects, decides the same.
type rolloutInput struct {
	spec vidrav1alpha1.RolloutSpec
	// last is the status as last written; hash identifies the newest content.
	last vidrav1alpha1.RolloutStatus
	hash string
	// hasStable: a revision completed before, so there is content to fall back to.
	hasStable bool
	// resume is the resume-requested-at annotation's value.
	resume   string
	now      time.Time
	clusters []clusterView
}

// rolloutPlan is what the planner decided.
type rolloutPlan struct {
	status  vidrav1alpha1.RolloutStatus
	moves   map[string]move
	events  []rolloutEvent
	waves   []string // results of waves that ended, for the metric
	requeue time.Duration
	// completed: the newest revision reached every cluster, healthy; it becomes stable.
	completed bool
}

// wave is one wave's clusters, in name order.
type wave struct {
	name       string
	pauseAfter time.Duration
	clusters   []clusterView
}

// waves groups the clusters: each in the first wave whose selector matches, the rest in
// the implicit last wave. Waves without clusters are kept, so names stay stable.
func waves(spec vidrav1alpha1.RolloutSpec, clusters []clusterView) ([]wave, error) {
	out := make([]wave, 0, len(spec.Waves)+1)
	selectors := make([]labels.Selector, 0, len(spec.Waves))
	for _, w := range spec.Waves {
		sel, err := metav1.LabelSelectorAsSelector(w.ClusterSelector)
		if err != nil {
			return nil, fmt.Errorf("wave %s: clusterSelector: %w", w.Name, err)
		}
		selectors = append(selectors, sel)
		var pause time.Duration
		if w.PauseAfter != nil {
			pause = w.PauseAfter.Duration
		}
		out = append(out, wave{name: w.Name, pauseAfter: pause})
	}
	out = append(out, wave{name: remainingWave})
	for _, c := range clusters {
		i := slices.IndexFunc(selectors, func(s labels.Selector) bool { return s.Matches(labels.Set(c.labels)) })
		if i < 0 {
			i = len(out) - 1
		}
		out[i].clusters = append(out[i].clusters, c)
	}
	for i := range out {
		slices.SortFunc(out[i].clusters, func(a, b clusterView) int { return strings.Compare(a.name, b.name) })
	}
	return out, nil
}

// budget is how many clusters of a wave of size n may be updating or unhealthy at once.
func budget(spec vidrav1alpha1.RolloutSpec, n int) int {
	mu := intstr.FromInt32(1)
	if spec.MaxUnavailable != nil {
		mu = *spec.MaxUnavailable
	}
	v, err := intstr.GetScaledValueFromIntOrPercent(&mu, n, false)
	if err != nil || v < 1 {
		return 1
	}
	return v
}

// planRollout decides which clusters move to the newest content now, which fall back to
// the stable one, and what the status says. Clusters are only ever moved by what the API
// shows of them, so planning twice from the same objects moves nothing twice.
func planRollout(in rolloutInput) (rolloutPlan, error) {
	p := rolloutPlan{status: in.last, moves: map[string]move{}}
	st := &p.status
	all, err := waves(in.spec, in.clusters)
	if err != nil {
		return p, err
	}
	timeout := defaultHealthTimeout
	if in.spec.HealthTimeout != nil {
		timeout = in.spec.HealthTimeout.Duration
	}
	now := metav1.NewTime(in.now)

	// A new revision starts again from the first wave.
	if st.ContentHash != in.hash {
		st.Revision++
		st.ContentHash = in.hash
		st.Phase = vidrav1alpha1.RolloutProgressing
		st.Wave = firstWave(all)
		st.FailedClusters = nil
		st.WaveCompletedAt = nil
		st.StartedAt = &now
		p.events = append(p.events, rolloutEvent{corev1.EventTypeNormal, vidrav1alpha1.EventRolloutStarted, fmt.Sprintf("revision %d: wave %s first", st.Revision, st.Wave)})
	}
	// A person resumed: failed clusters get another healthTimeout, counted from now.
	if in.resume != "" && in.resume != st.Resumed {
		st.Resumed = in.resume
		st.ResumedAt = &now
		if st.Phase == vidrav1alpha1.RolloutFailed || st.Phase == vidrav1alpha1.RolloutRolledBack {
			st.Phase = vidrav1alpha1.RolloutProgressing
			p.events = append(p.events, rolloutEvent{corev1.EventTypeNormal, vidrav1alpha1.EventRolloutResumed, fmt.Sprintf("revision %d: resumed at wave %s", st.Revision, st.Wave)})
		}
		st.FailedClusters = nil
	}

	st.Total, st.Updated = 0, 0
	var pinned []string
	for _, c := range in.clusters {
		st.Total++
		if c.healthy {
			st.Updated++
		}
		if c.pinned {
			pinned = append(pinned, c.name)
		}
	}
	slices.Sort(pinned)

	// Clusters without content get the stable revision whatever the rollout does, until
	// their wave is reached.
	current := slices.IndexFunc(all, func(w wave) bool { return w.name == st.Wave })
	if current < 0 {
		current = 0
		st.Wave = firstWave(all)
	}
	// A cluster that joined a wave the rollout has passed takes that wave back: the
	// revision reaches it before any later cluster, and completes only once it has.
	if st.Phase != vidrav1alpha1.RolloutCompleted && st.Phase != vidrav1alpha1.RolloutFailed && st.Phase != vidrav1alpha1.RolloutRolledBack {
		if earlier := slices.IndexFunc(all[:current], lacksRevision); earlier >= 0 {
			current = earlier
			st.Wave = all[earlier].name
			st.WaveCompletedAt = nil
		}
	}
	for i, w := range all {
		for _, c := range w.clusters {
			if !c.present && !c.pinned && in.hasStable && (i != current || st.Phase != vidrav1alpha1.RolloutProgressing) {
				p.moves[c.name] = toStable
			}
		}
	}

	switch st.Phase {
	case vidrav1alpha1.RolloutCompleted:
		// The revision completed: clusters that lack it (joined since, or unpinned) get it,
		// unless a person paused the rollout.
		for _, c := range in.clusters {
			if !c.atTarget && !c.pinned && (!c.present || !in.spec.Paused) {
				p.moves[c.name] = toNewest
			}
		}
		st.Message = completedMessage(st, pinned)
		return p, nil
	case vidrav1alpha1.RolloutFailed, vidrav1alpha1.RolloutRolledBack:
		return p, nil // until the content changes or a person resumes
	}
	if len(in.clusters) == 0 {
		// Nothing to complete on: the revision waits for its first cluster, which then
		// gets it wave by wave, not as a revision that completed without one.
		st.Phase = vidrav1alpha1.RolloutProgressing
		st.Message = fmt.Sprintf("revision %d: no cluster is selected yet", st.Revision)
		return p, nil
	}
	if in.spec.Paused {
		st.Phase = vidrav1alpha1.RolloutPaused
		st.Message = fmt.Sprintf("paused at wave %s: %d of %d clusters updated", st.Wave, st.Updated, st.Total)
		return p, nil
	}
	st.Phase = vidrav1alpha1.RolloutProgressing

	for i := current; i < len(all); i++ {
		w := all[i]
		st.Wave = w.name
		var pending, updating, failed, held []clusterView
		unavailable := 0 // clusters not yet updated that are unhealthy anyway
		var wait time.Duration
		for _, c := range w.clusters {
			switch {
			case c.pinned && !c.atTarget:
				held = append(held, c)
			case c.pinned:
			case !c.atTarget:
				pending = append(pending, c)
				if c.present && c.unavailable {
					unavailable++
				}
			case c.healthy:
			default:
				if left := timeout - in.now.Sub(latest(c.updatedAt, st.ResumedAt)); left > 0 {
					updating = append(updating, c)
					wait = minPositive(wait, left)
				} else {
					failed = append(failed, c)
				}
			}
		}
		if len(failed) > 0 {
			p.fail(in, w, failed, timeout)
			return p, nil
		}
		room := budget(in.spec, len(w.clusters)) - len(updating) - unavailable
		moved := 0
		for _, c := range pending {
			if moved >= room {
				break
			}
			p.moves[c.name] = toNewest
			moved++
			wait = minPositive(wait, timeout)
		}
		if len(updating) > 0 || len(pending) > 0 {
			st.WaveCompletedAt = nil
			st.Message = fmt.Sprintf("wave %s: %d updating, %d waiting, %d of %d clusters updated", w.name, len(updating)+moved, len(pending)-moved, st.Updated, st.Total)
			if len(held) > 0 {
				st.Message += fmt.Sprintf("; %d pinned by a rollback until `kubectl vidra rollout resume`", len(held))
			}
			p.requeue = wait
			return p, nil
		}
		if len(held) > 0 {
			// A revision completes only where it runs: pinned clusters hold the wave.
			st.WaveCompletedAt = nil
			names := make([]string, 0, len(held))
			for _, c := range held {
				names = append(names, c.name)
			}
			st.Message = fmt.Sprintf("wave %s: waiting for %s, pinned by a rollback, until `kubectl vidra rollout resume`", w.name, strings.Join(names, ", "))
			return p, nil
		}
		// The wave is healthy.
		if st.WaveCompletedAt == nil {
			st.WaveCompletedAt = &now
			if len(w.clusters) > 0 {
				p.waves = append(p.waves, "completed")
				p.events = append(p.events, rolloutEvent{corev1.EventTypeNormal, vidrav1alpha1.EventWaveCompleted, fmt.Sprintf("revision %d: wave %s healthy (%d clusters)", st.Revision, w.name, len(w.clusters))})
			}
		}
		if left := w.pauseAfter - in.now.Sub(st.WaveCompletedAt.Time); left > 0 && len(w.clusters) > 0 && laterClusters(all, i) {
			st.Message = fmt.Sprintf("wave %s healthy; the next starts in %s", w.name, left.Round(time.Second))
			p.requeue = left
			return p, nil
		}
		if i == len(all)-1 {
			break
		}
		st.WaveCompletedAt = nil
		if next := all[i+1]; len(next.clusters) > 0 {
			p.events = append(p.events, rolloutEvent{corev1.EventTypeNormal, vidrav1alpha1.EventWaveStarted, fmt.Sprintf("revision %d: wave %s (%d clusters)", st.Revision, next.name, len(next.clusters))})
		}
	}
	// A revision completes only where it is healthy: a cluster of a wave already passed
	// that has it and is not healthy (it got it in another wave, before its labels placed
	// it, or it turned unhealthy since) holds the completion, for healthTimeout from when
	// it got the revision or the last wave became healthy, whichever is later. Past that
	// the rollout fails, and pauses even with onFailure: Rollback: later waves have the
	// revision, so sending one earlier wave back would leave the fleet split.
	var waiting, late []string
	var wait time.Duration
	for _, w := range all {
		for _, c := range w.clusters {
			if c.pinned || !c.atTarget || c.healthy {
				continue
			}
			if left := timeout - in.now.Sub(latest(c.updatedAt, st.WaveCompletedAt, st.ResumedAt)); left > 0 {
				waiting = append(waiting, c.name)
				wait = minPositive(wait, left)
			} else {
				late = append(late, fmt.Sprintf("%s (%s)", c.name, c.unhealthy))
				st.FailedClusters = append(st.FailedClusters, c.name)
			}
		}
	}
	if len(late) > 0 {
		st.Phase = vidrav1alpha1.RolloutFailed
		st.Message = fmt.Sprintf("revision %d: not healthy within %s after the last wave: %s; nothing is rolled back or updated until the content changes or `kubectl vidra rollout resume`",
			st.Revision, timeout, strings.Join(late, "; "))
		p.waves = append(p.waves, "failed")
		p.events = append(p.events, rolloutEvent{corev1.EventTypeWarning, vidrav1alpha1.ReasonRolloutFailed, st.Message})
		return p, nil
	}
	if len(waiting) > 0 {
		st.Message = fmt.Sprintf("waiting for %s to become healthy: %d of %d clusters updated", strings.Join(waiting, ", "), st.Updated, st.Total)
		p.requeue = wait
		return p, nil
	}
	st.Phase = vidrav1alpha1.RolloutCompleted
	st.WaveCompletedAt = nil
	st.StableRevision = st.Revision
	st.Wave = lastWave(all)
	st.Message = completedMessage(st, pinned)
	p.completed = true
	p.events = append(p.events, rolloutEvent{corev1.EventTypeNormal, vidrav1alpha1.EventRolloutCompleted, fmt.Sprintf("revision %d reached %d clusters", st.Revision, st.Updated)})
	return p, nil
}

// fail stops the rollout at wave w: with Rollback every cluster of the wave that took
// the revision (pinned ones aside) returns to the stable revision.
func (p *rolloutPlan) fail(in rolloutInput, w wave, failed []clusterView, timeout time.Duration) {
	st := &p.status
	names := make([]string, 0, len(failed))
	reasons := make([]string, 0, len(failed))
	for _, c := range failed {
		names = append(names, c.name)
		reasons = append(reasons, fmt.Sprintf("%s (%s)", c.name, c.unhealthy))
	}
	st.FailedClusters = names
	detail := fmt.Sprintf("revision %d: wave %s: not healthy within %s: %s", st.Revision, w.name, timeout, strings.Join(reasons, "; "))
	if in.spec.OnFailure == vidrav1alpha1.RolloutFailureRollback && in.hasStable {
		// The whole wave goes back, healthy clusters that took the revision too: a
		// revision that failed in a wave does not stay on part of it.
		st.Phase = vidrav1alpha1.RolloutRolledBack
		var back []string
		for _, c := range w.clusters {
			if !c.pinned && c.atTarget {
				p.moves[c.name] = toStable
				back = append(back, c.name)
			}
		}
		st.Message = fmt.Sprintf("%s; wave %s rolled back to the previous revision: %s", detail, w.name, strings.Join(back, ", "))
		p.waves = append(p.waves, "rolledback")
		p.events = append(p.events, rolloutEvent{corev1.EventTypeWarning, vidrav1alpha1.ReasonRolledBack, st.Message})
		return
	}
	st.Phase = vidrav1alpha1.RolloutFailed
	st.Message = detail + "; nothing more is updated until the content changes or `kubectl vidra rollout resume`"
	if in.spec.OnFailure == vidrav1alpha1.RolloutFailureRollback {
		st.Message = detail + "; there is no previous revision to roll back to, so nothing more is updated"
	}
	p.waves = append(p.waves, "failed")
	p.events = append(p.events, rolloutEvent{corev1.EventTypeWarning, vidrav1alpha1.ReasonRolloutFailed, st.Message})
}

func completedMessage(st *vidrav1alpha1.RolloutStatus, pinned []string) string {
	msg := fmt.Sprintf("revision %d: %d of %d clusters updated", st.Revision, st.Updated, st.Total)
	if len(pinned) > 0 {
		msg += "; pinned by a rollback: " + strings.Join(pinned, ", ")
	}
	return msg
}

// latest is the latest of t and the times given (nil: none): when a cluster's
// healthTimeout starts.
func latest(t time.Time, others ...*metav1.Time) time.Time {
	for _, o := range others {
		if o != nil && o.After(t) {
			t = o.Time
		}
	}
	return t
}

// lacksRevision says whether a wave has a cluster the rollout still has to update.
func lacksRevision(w wave) bool {
	return slices.ContainsFunc(w.clusters, func(c clusterView) bool { return !c.atTarget && !c.pinned })
}

func firstWave(all []wave) string {
	for _, w := range all {
		if len(w.clusters) > 0 {
			return w.name
		}
	}
	return all[0].name
}

// laterClusters says whether a wave after i has clusters: only then is pauseAfter waited.
func laterClusters(all []wave, i int) bool {
	for _, w := range all[i+1:] {
		if len(w.clusters) > 0 {
			return true
		}
	}
	return false
}

func lastWave(all []wave) string {
	for i := len(all) - 1; i >= 0; i-- {
		if len(all[i].clusters) > 0 {
			return all[i].name
		}
	}
	return all[len(all)-1].name
}

func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 || b < a {
		return b
	}
	return a
}
