package fairshare

import (
	"sync"
	"testing"
	"time"
)

func TestAKeyHoldsNoMoreThanItsLimitAndOthersGoOn(t *testing.T) {
	var s Slots[string]
	var releases []func()
	for range 3 {
		release, ok := s.Take("slow", 3)
		if !ok {
			t.Fatal("a slot under the limit was refused")
		}
		releases = append(releases, release)
	}
	if _, ok := s.Take("slow", 3); ok {
		t.Fatal("a fourth slot was given to a key limited to 3")
	}
	if _, ok := s.Take("other", 3); !ok {
		t.Fatal("another key was refused while one was full")
	}
	releases[0]()
	releases[0]() // twice is once
	if got := s.Held("slow"); got != 2 {
		t.Fatalf("held %d after one release (released twice), want 2", got)
	}
	if _, ok := s.Take("slow", 3); !ok {
		t.Fatal("a slot given back was not taken again")
	}
	if _, ok := s.Take("slow", 0); !ok {
		t.Fatal("no limit refused")
	}
}

func TestSlotsUnderConcurrentUse(t *testing.T) {
	var s Slots[int]
	var wg sync.WaitGroup
	var mu sync.Mutex
	most := 0
	for range 64 {
		wg.Go(func() {
			for range 100 {
				release, ok := s.Take(1, 4)
				if !ok {
					continue
				}
				mu.Lock()
				most = max(most, s.Held(1))
				mu.Unlock()
				release()
			}
		})
	}
	wg.Wait()
	if most > 4 || s.Held(1) != 0 {
		t.Fatalf("held at most %d (limit 4), %d at the end", most, s.Held(1))
	}
}

func TestRetryIsJitteredAroundItsBase(t *testing.T) {
	for range 100 {
		if d := Retry(2 * time.Second); d < time.Second || d >= 3*time.Second {
			t.Fatalf("Retry(2s) = %s, want within [1s, 3s)", d)
		}
	}
}

func TestSourceKeyIsTheServer(t *testing.T) {
	for url, want := range map[string]string{
		"https://Git.Example/org/a.git":      "https://git.example",
		"https://git.example/org/b.git":      "https://git.example",
		"https://git.example:8443/org/a.git": "https://git.example:8443",
		"oci://registry.example/manifests/x": "oci://registry.example",
		"http://127.0.0.1:5000/graphql/main": "http://127.0.0.1:5000",
		"git@git.example:org/a.git":          "git@git.example:org/a.git",
	} {
		if got := SourceKey(url); got != want {
			t.Errorf("SourceKey(%q) = %q, want %q", url, got, want)
		}
	}
}
