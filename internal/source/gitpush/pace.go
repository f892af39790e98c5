package gitpush

import (
	"sync"
	"time"
)

// Pacer lets each repository's pushes request syncs at most once per interval. Each
// accepted push writes every GitSync of its repository, so whoever holds a repository's
// key could otherwise have the hub write them as fast as it can sign. A push that comes
// sooner is not lost: it waits, merged with any other waiting for that repository, until
// Due hands it over.
type Pacer struct {
	// Interval between two requests of one repository's syncs.
	Interval time.Duration
	// MaxRepositories bounds the repositories remembered; idle ones are forgotten first.
	MaxRepositories int

	mu    sync.Mutex
	repos map[string]*pace
}

type pace struct {
	// next is when the repository's syncs may next be requested.
	next time.Time
	// waiting is the push merged from those that came sooner; nil when none did.
	waiting *Push
}

// Admit says whether push may request syncs now. If not, it waits, and at says when
// its turn comes.
func (p *Pacer) Admit(push Push, now time.Time) (admitted bool, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.repos[push.Repository]
	if r == nil {
		r = &pace{}
		p.keep(push.Repository, r, now)
	}
	if !now.Before(r.next) {
		r.next = now.Add(p.Interval)
		return true, now
	}
	r.waiting = merge(r.waiting, push)
	return false, r.next
}

// Wait puts push back to wait for its repository's next turn (a request that failed).
func (p *Pacer) Wait(push Push, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.repos[push.Repository]
	if r == nil {
		r = &pace{next: now.Add(p.Interval)}
		p.keep(push.Repository, r, now)
	}
	r.waiting = merge(r.waiting, push)
}

// Due returns the waiting pushes whose turn has come, each counted as its repository's
// request.
func (p *Pacer) Due(now time.Time) []Push {
	p.mu.Lock()
	defer p.mu.Unlock()
	var due []Push
	for _, r := range p.repos {
		if r.waiting != nil && !now.Before(r.next) {
			due = append(due, *r.waiting)
			r.waiting, r.next = nil, now.Add(p.Interval)
		}
	}
	return due
}

// keep remembers r, first forgetting idle repositories when MaxRepositories is reached.
// Only a push signed with a repository's key gets here, so the repositories are those
// given keys; a full map of busy ones still admits, unremembered.
func (p *Pacer) keep(repository string, r *pace, now time.Time) {
	if p.repos == nil {
		p.repos = map[string]*pace{}
	}
	if p.MaxRepositories > 0 && len(p.repos) >= p.MaxRepositories {
		for k, old := range p.repos {
			if old.waiting == nil && !now.Before(old.next) {
				delete(p.repos, k)
			}
		}
		if len(p.repos) >= p.MaxRepositories {
			return
		}
	}
	p.repos[repository] = r
}

// merge is what a push waiting and one more ask of the repository: a ref when both name
// the same, else any.
func merge(waiting *Push, push Push) *Push {
	if waiting == nil {
		return &push
	}
	if waiting.Ref != push.Ref {
		waiting.Ref = ""
	}
	return waiting
}
