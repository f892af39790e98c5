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

func TestATurnedAwayItemIsWokenOnceWhenItsKeyGivesASlotBack(t *testing.T) {
	var s Slots[string]
	release, ok := s.TakeOrWait("busy", 1, "first", nil)
	if !ok {
		t.Fatal("a free slot was refused")
	}
	var woken []string
	wake := func(name string) func() { return func() { woken = append(woken, name) } }
	for _, waiter := range []string{"second", "third", "second"} { // turned away twice: woken once
		if _, ok := s.TakeOrWait("busy", 1, waiter, wake(waiter)); ok {
			t.Fatalf("%s took a slot over the limit", waiter)
		}
	}
	if _, ok := s.TakeOrWait("other", 1, "elsewhere", wake("elsewhere")); !ok {
		t.Fatal("another key was refused")
	}
	release()
	if len(woken) != 1 || woken[0] != "second" {
		t.Fatalf("woken %v on the first slot given back, want [second]", woken)
	}
	// third takes the slot given back before second comes for it: it is not woken later.
	releaseThird, ok := s.TakeOrWait("busy", 1, "third", wake("third"))
	if !ok {
		t.Fatal("a free slot was refused")
	}
	releaseThird()
	if len(woken) != 1 {
		t.Fatalf("woken %v; want no one more: third went on its own, and second was woken already", woken)
	}
	if _, ok := s.TakeOrWait("busy", 1, "second", wake("second")); !ok {
		t.Fatal("the woken item was refused the free slot")
	}
}

func TestASyncTakesASlotOfItsServerAndOfItsRequesterOrNone(t *testing.T) {
	var s SyncShare
	var releases []func()
	for _, url := range []string{"https://slow-1.example/a", "https://slow-2.example/b"} {
		release, ok := s.Take(url, 2, "tenant", 2)
		if !ok {
			t.Fatalf("%s refused under both limits", url)
		}
		releases = append(releases, release)
	}
	// A third server, but the requester holds its two.
	if _, ok := s.Take("https://slow-3.example/c", 2, "tenant", 2); ok {
		t.Fatal("a requester holding its limit took a third worker through another server")
	}
	if got := s.bySource.Held(SourceKey("https://slow-3.example/c")); got != 0 {
		t.Fatalf("the refused take kept %d of the server's slots", got)
	}
	if _, ok := s.Take("https://slow-3.example/c", 2, "other-team", 2); !ok {
		t.Fatal("another requester was refused")
	}
	// Syncs that say nothing of who asked are bounded by their server alone.
	s.Take("https://git.example/x", 2, "", 1)
	if _, ok := s.Take("https://git.example/y", 2, "", 1); !ok {
		t.Fatal("a second sync without a requester was refused under its server's limit")
	}
	releases[0]()
	if got := s.byRequester.Held("tenant"); got != 1 {
		t.Fatalf("the requester holds %d after a release, want 1", got)
	}
}
