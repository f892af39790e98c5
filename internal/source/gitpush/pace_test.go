package gitpush

import (
	"testing"
	"time"
)

// One repository's pushes request syncs once per interval; sooner ones wait, merged,
// for its next turn, and another repository keeps its own pace.
func TestPacerLetsOneRequestPerRepositoryPerInterval(t *testing.T) {
	p := &Pacer{Interval: 10 * time.Second, MaxRepositories: 10}
	start := time.Unix(1764900000, 0)
	main := Push{Repository: "h/o/r", Ref: "refs/heads/main"}
	if ok, _ := p.Admit(main, start); !ok {
		t.Fatal("the first push waits")
	}
	if ok, at := p.Admit(main, start.Add(time.Second)); ok || !at.Equal(start.Add(10*time.Second)) {
		t.Fatalf("a push 1s later: admitted %v, turn at %v; want to wait until %v", ok, at, start.Add(10*time.Second))
	}
	if ok, _ := p.Admit(Push{Repository: "h/o/other", Ref: "refs/heads/main"}, start.Add(time.Second)); !ok {
		t.Fatal("another repository's push waits for this one's pace")
	}
	p.Admit(Push{Repository: "h/o/r", Ref: "refs/heads/release"}, start.Add(2*time.Second))
	if due := p.Due(start.Add(9 * time.Second)); len(due) != 0 {
		t.Fatalf("due before the turn: %+v", due)
	}
	due := p.Due(start.Add(10 * time.Second))
	if len(due) != 1 || due[0].Repository != "h/o/r" || due[0].Ref != "" {
		t.Fatalf("due at the turn: %+v; want one push of h/o/r for any ref (main and release merged)", due)
	}
	if due := p.Due(start.Add(30 * time.Second)); len(due) != 0 {
		t.Fatalf("handed over twice: %+v", due)
	}
	// Handed over at 10s, which was the repository's request: the next waits until 20s.
	if ok, _ := p.Admit(main, start.Add(15*time.Second)); ok {
		t.Fatal("a push 5s after a waiting one was handed over did not wait")
	}
}

// Idle repositories are forgotten to make room; busy ones are kept.
func TestPacerForgetsIdleRepositories(t *testing.T) {
	p := &Pacer{Interval: time.Second, MaxRepositories: 2}
	now := time.Unix(1764900000, 0)
	p.Admit(Push{Repository: "a"}, now)
	p.Admit(Push{Repository: "b"}, now)
	p.Admit(Push{Repository: "b"}, now) // b waits
	p.Admit(Push{Repository: "c"}, now.Add(2*time.Second))
	if _, ok := p.repos["a"]; ok {
		t.Error("idle repository a kept past the bound")
	}
	if _, ok := p.repos["b"]; !ok {
		t.Error("repository b, with a push waiting, forgotten")
	}
}
