package rollout

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// decision is one run of the planner: what it decides from, and the plan it builds.
type decision struct {
	in      Input
	p       *Plan
	st      *vidrav1alpha1.RolloutStatus
	all     []wave
	timeout time.Duration
	now     metav1.Time
	// pinned are the clusters a rollback holds, sorted.
	pinned []string
}

func healthTimeout(spec vidrav1alpha1.RolloutSpec) time.Duration {
	if spec.HealthTimeout != nil {
		return spec.HealthTimeout.Duration
	}
	return defaultHealthTimeout
}

func (d *decision) event(eventType, reason, note string) {
	d.p.Events = append(d.p.Events, Event{eventType, reason, note})
}

// startRevision starts a new revision again from the first wave.
func (d *decision) startRevision() {
	st := d.st
	if st.ContentHash == d.in.Hash {
		return
	}
	st.Revision++
	st.ContentHash = d.in.Hash
	st.Phase = vidrav1alpha1.RolloutProgressing
	st.Wave = firstWave(d.all)
	st.FailedClusters = nil
	st.WaveCompletedAt = nil
	st.StartedAt = &d.now
	d.event(corev1.EventTypeNormal, vidrav1alpha1.EventRolloutStarted, fmt.Sprintf("revision %d: wave %s first", st.Revision, st.Wave))
}

// resume takes a person's resume: failed clusters get another healthTimeout, counted
// from now.
func (d *decision) resume() {
	st := d.st
	if d.in.Resume == "" || d.in.Resume == st.Resumed {
		return
	}
	st.Resumed = d.in.Resume
	st.ResumedAt = &d.now
	if st.Phase == vidrav1alpha1.RolloutFailed || st.Phase == vidrav1alpha1.RolloutRolledBack {
		st.Phase = vidrav1alpha1.RolloutProgressing
		d.event(corev1.EventTypeNormal, vidrav1alpha1.EventRolloutResumed, fmt.Sprintf("revision %d: resumed at wave %s", st.Revision, st.Wave))
	}
	st.FailedClusters = nil
}

// count counts the clusters, those updated (healthy on the newest content) and those a
// rollback pins.
func (d *decision) count() {
	d.st.Total, d.st.Updated = 0, 0
	for _, c := range d.in.Clusters {
		d.st.Total++
		if c.Healthy {
			d.st.Updated++
		}
		if c.Pinned {
			d.pinned = append(d.pinned, c.Name)
		}
	}
	slices.Sort(d.pinned)
}

// currentWave is the index of the wave the rollout is at. A cluster that joined a wave
// the rollout has passed takes that wave back: the revision reaches it before any later
// cluster, and completes only once it has.
func (d *decision) currentWave() int {
	st := d.st
	current := slices.IndexFunc(d.all, func(w wave) bool { return w.Name == st.Wave })
	if current < 0 {
		current = 0
		st.Wave = firstWave(d.all)
	}
	if st.Phase != vidrav1alpha1.RolloutCompleted && st.Phase != vidrav1alpha1.RolloutFailed && st.Phase != vidrav1alpha1.RolloutRolledBack {
		if earlier := slices.IndexFunc(d.all[:current], lacksRevision); earlier >= 0 {
			current = earlier
			st.Wave = d.all[earlier].Name
			st.WaveCompletedAt = nil
		}
	}
	return current
}

// holdStable gives clusters without content the stable revision, whatever the rollout
// does, until their wave is reached.
func (d *decision) holdStable(current int) {
	for i, w := range d.all {
		for _, c := range w.Clusters {
			if !c.Present && !c.Pinned && d.in.HasStable && (i != current || d.st.Phase != vidrav1alpha1.RolloutProgressing) {
				d.p.Moves[c.Name] = ToStable
			}
		}
	}
}

// keepCompleted keeps a completed revision everywhere: clusters that lack it (joined
// since, or unpinned) get it, unless a person paused the rollout.
func (d *decision) keepCompleted() {
	for _, c := range d.in.Clusters {
		if !c.AtTarget && !c.Pinned && (!c.Present || !d.in.Spec.Paused) {
			d.p.Moves[c.Name] = ToNewest
		}
	}
	d.st.Message = completedMessage(d.st, d.pinned)
}

// waiting says whether the rollout waits, for a first cluster or for a person.
func (d *decision) waiting() bool {
	st := d.st
	switch {
	case len(d.in.Clusters) == 0:
		// Nothing to complete on: the revision waits for its first cluster, which then
		// gets it wave by wave, not as a revision that completed without one.
		st.Phase = vidrav1alpha1.RolloutProgressing
		st.Message = fmt.Sprintf("revision %d: no cluster is selected yet", st.Revision)
		return true
	case d.in.Spec.Paused:
		st.Phase = vidrav1alpha1.RolloutPaused
		st.Message = fmt.Sprintf("paused at wave %s: %d of %d clusters updated", st.Wave, st.Updated, st.Total)
		return true
	}
	return false
}

// waveState is where the clusters of one wave stand.
type waveState struct {
	pending, updating, failed, held []Cluster
	// unavailable counts clusters not yet updated that are unhealthy anyway.
	unavailable int
	// wait is how soon the first updating cluster's healthTimeout ends.
	wait time.Duration
}

// stateOf sorts the clusters of wave w by where they stand.
func (d *decision) stateOf(w wave) waveState {
	var s waveState
	for _, c := range w.Clusters {
		switch {
		case c.Pinned && !c.AtTarget:
			s.held = append(s.held, c)
		case c.Pinned:
		case !c.AtTarget:
			s.pending = append(s.pending, c)
			if c.Present && c.Unavailable {
				s.unavailable++
			}
		case c.Healthy:
		default:
			if left := d.timeout - d.in.Now.Sub(latest(c.UpdatedAt, d.st.ResumedAt)); left > 0 {
				s.updating = append(s.updating, c)
				s.wait = minPositive(s.wait, left)
			} else {
				s.failed = append(s.failed, c)
			}
		}
	}
	return s
}

// advance moves wave i on: its pending clusters within the budget, or the rollout past
// it once it is healthy. It says whether the rollout goes on to the next wave.
func (d *decision) advance(i int) bool {
	st, w := d.st, d.all[i]
	st.Wave = w.Name
	s := d.stateOf(w)
	if len(s.failed) > 0 {
		d.p.fail(d.in, w, s.failed, d.timeout)
		return false
	}
	limit := budget(d.in.Spec, len(w.Clusters))
	room := limit - len(s.updating) - s.unavailable
	moved, spent, down := 0, 0, 0
	for _, c := range s.pending {
		switch {
		case c.Present && c.Failing && down < limit:
			// Down already on what it has: moving it takes nothing away, and keeping it
			// waiting would hold its wave, and the fix it may need, for good. Such moves
			// are bounded by the budget too.
			down++
		case spent < room:
			spent++
		default:
			continue
		}
		d.p.Moves[c.Name] = ToNewest
		moved++
		s.wait = minPositive(s.wait, d.timeout)
	}
	if len(s.updating) > 0 || len(s.pending) > 0 {
		st.WaveCompletedAt = nil
		st.Message = fmt.Sprintf("wave %s: %d updating, %d waiting, %d of %d clusters updated", w.Name, len(s.updating)+moved, len(s.pending)-moved, st.Updated, st.Total)
		if len(s.held) > 0 {
			st.Message += fmt.Sprintf("; %d pinned by a rollback until `kubectl vidra rollout resume`", len(s.held))
		}
		d.p.Requeue = s.wait
		return false
	}
	if len(s.held) > 0 {
		// A revision completes only where it runs: pinned clusters hold the wave.
		st.WaveCompletedAt = nil
		names := make([]string, 0, len(s.held))
		for _, c := range s.held {
			names = append(names, c.Name)
		}
		st.Message = fmt.Sprintf("wave %s: waiting for %s, pinned by a rollback, until `kubectl vidra rollout resume`", w.Name, strings.Join(names, ", "))
		return false
	}
	return d.passHealthy(i)
}

// passHealthy passes wave i, which is healthy, once its pauseAfter is over. It says
// whether the rollout goes on to the next wave.
func (d *decision) passHealthy(i int) bool {
	st, w := d.st, d.all[i]
	if st.WaveCompletedAt == nil {
		st.WaveCompletedAt = &d.now
		if len(w.Clusters) > 0 {
			d.p.Waves = append(d.p.Waves, "completed")
			d.event(corev1.EventTypeNormal, vidrav1alpha1.EventWaveCompleted, fmt.Sprintf("revision %d: wave %s healthy (%d clusters)", st.Revision, w.Name, len(w.Clusters)))
		}
	}
	if left := w.pauseAfter - d.in.Now.Sub(st.WaveCompletedAt.Time); left > 0 && len(w.Clusters) > 0 && laterClusters(d.all, i) {
		st.Message = fmt.Sprintf("wave %s healthy; the next starts in %s", w.Name, left.Round(time.Second))
		d.p.Requeue = left
		return false
	}
	if i == len(d.all)-1 {
		return true
	}
	st.WaveCompletedAt = nil
	if next := d.all[i+1]; len(next.Clusters) > 0 {
		d.event(corev1.EventTypeNormal, vidrav1alpha1.EventWaveStarted, fmt.Sprintf("revision %d: wave %s (%d clusters)", st.Revision, next.Name, len(next.Clusters)))
	}
	return true
}

// complete completes the revision once every wave is through, where it is healthy: a
// cluster of a wave already passed that has it and is not healthy (it got it in another
// wave, before its labels placed it, or it turned unhealthy since) holds the completion,
// for healthTimeout from when it got the revision or the last wave became healthy,
// whichever is later. Past that the rollout fails, and pauses even with onFailure:
// Rollback: later waves have the revision, so sending one earlier wave back would leave
// the fleet split.
func (d *decision) complete() {
	st := d.st
	var waiting, late []string
	var wait time.Duration
	for _, w := range d.all {
		for _, c := range w.Clusters {
			if c.Pinned || !c.AtTarget || c.Healthy {
				continue
			}
			if left := d.timeout - d.in.Now.Sub(latest(c.UpdatedAt, st.WaveCompletedAt, st.ResumedAt)); left > 0 {
				waiting = append(waiting, c.Name)
				wait = minPositive(wait, left)
			} else {
				late = append(late, fmt.Sprintf("%s (%s)", c.Name, c.Unhealthy))
				st.FailedClusters = append(st.FailedClusters, c.Name)
			}
		}
	}
	switch {
	case len(late) > 0:
		st.Phase = vidrav1alpha1.RolloutFailed
		st.Message = fmt.Sprintf("revision %d: not healthy within %s after the last wave: %s; nothing is rolled back or updated until the content changes or `kubectl vidra rollout resume`",
			st.Revision, d.timeout, strings.Join(late, "; "))
		d.p.Waves = append(d.p.Waves, "failed")
		d.event(corev1.EventTypeWarning, vidrav1alpha1.ReasonRolloutFailed, st.Message)
	case len(waiting) > 0:
		st.Message = fmt.Sprintf("waiting for %s to become healthy: %d of %d clusters updated", strings.Join(waiting, ", "), st.Updated, st.Total)
		d.p.Requeue = wait
	default:
		st.Phase = vidrav1alpha1.RolloutCompleted
		st.WaveCompletedAt = nil
		st.StableRevision = st.Revision
		st.Wave = lastWave(d.all)
		st.Message = completedMessage(st, d.pinned)
		d.p.Completed = true
		d.event(corev1.EventTypeNormal, vidrav1alpha1.EventRolloutCompleted, fmt.Sprintf("revision %d reached %d clusters", st.Revision, st.Updated))
	}
}

// fail stops the rollout at wave w: with Rollback every cluster of the wave that took
// the revision (pinned ones aside) returns to the stable revision.
func (p *Plan) fail(in Input, w wave, failed []Cluster, timeout time.Duration) {
	st := &p.Status
	names := make([]string, 0, len(failed))
	reasons := make([]string, 0, len(failed))
	for _, c := range failed {
		names = append(names, c.Name)
		reasons = append(reasons, fmt.Sprintf("%s (%s)", c.Name, c.Unhealthy))
	}
	st.FailedClusters = names
	detail := fmt.Sprintf("revision %d: wave %s: not healthy within %s: %s", st.Revision, w.Name, timeout, strings.Join(reasons, "; "))
	if in.Spec.OnFailure == vidrav1alpha1.RolloutFailureRollback && in.HasStable {
		// The whole wave goes back, healthy clusters that took the revision too: a
		// revision that failed in a wave does not stay on part of it.
		st.Phase = vidrav1alpha1.RolloutRolledBack
		var back []string
		for _, c := range w.Clusters {
			if !c.Pinned && c.AtTarget {
				p.Moves[c.Name] = ToStable
				back = append(back, c.Name)
			}
		}
		st.Message = fmt.Sprintf("%s; wave %s rolled back to the previous revision: %s", detail, w.Name, strings.Join(back, ", "))
		p.Waves = append(p.Waves, "rolledback")
		p.Events = append(p.Events, Event{corev1.EventTypeWarning, vidrav1alpha1.ReasonRolledBack, st.Message})
		return
	}
	st.Phase = vidrav1alpha1.RolloutFailed
	st.Message = detail + "; nothing more is updated until the content changes or `kubectl vidra rollout resume`"
	if in.Spec.OnFailure == vidrav1alpha1.RolloutFailureRollback {
		st.Message = detail + "; there is no previous revision to roll back to, so nothing more is updated"
	}
	p.Waves = append(p.Waves, "failed")
	p.Events = append(p.Events, Event{corev1.EventTypeWarning, vidrav1alpha1.ReasonRolloutFailed, st.Message})
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

func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 || b < a {
		return b
	}
	return a
}
