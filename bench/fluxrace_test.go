package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A Kustomization counts as Ready at a revision only when Ready is True for its
// generation and the revision is the one it last applied: Ready left from the commit
// before is not enough.
func TestFluxNotReadyReadsAKustomizationsStatus(t *testing.T) {
	const revision = "main@sha1:2"
	kustomization := func(generation, observed int64, ready, applied string) unstructured.Unstructured {
		u := unstructured.Unstructured{Object: map[string]any{
			"status": map[string]any{
				"observedGeneration":  observed,
				"lastAppliedRevision": applied,
				"conditions": []any{map[string]any{
					"type": "Ready", "status": ready, "reason": "ReconciliationSucceeded", "message": "Applied revision: " + applied,
					"lastTransitionTime": "2026-12-06T22:00:00Z",
				}},
			},
		}}
		u.SetGroupVersionKind(kustomizationKind)
		u.SetGeneration(generation)
		return u
	}
	for _, tc := range []struct {
		name string
		k    unstructured.Unstructured
		want string // a part of the reason, "" for Ready
	}{
		{"ready at the revision", kustomization(1, 1, "True", revision), ""},
		{"ready at the commit before", kustomization(1, 1, "True", "main@sha1:1"), "applied main@sha1:1"},
		{"not ready", kustomization(1, 1, "False", revision), "Ready False"},
		{"a generation not observed yet", kustomization(2, 1, "True", revision), "not reconciled yet"},
		{"no status", func() unstructured.Unstructured {
			u := unstructured.Unstructured{Object: map[string]any{}}
			u.SetGeneration(1)
			return u
		}(), "not reconciled yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fluxNotReady(tc.k, revision)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("fluxNotReady = %q, want %q", got, tc.want)
			}
		})
	}
}

// The sampler keeps the most a group of processes held at once, and says when it could
// not read one.
func TestRSSPeaksSumEachGroupsProcesses(t *testing.T) {
	self := os.Getpid()
	p := sampleRSS(t.Context(), time.Millisecond, [][]int{{self}, {self, self}})
	time.Sleep(20 * time.Millisecond)
	peaks, err := p.stop()
	if err != nil {
		t.Fatal(err)
	}
	if peaks[0] <= 0 || peaks[1] < 1.9*peaks[0] {
		t.Fatalf("peaks = %v, want a positive one and about twice it", peaks)
	}
	if again, _ := p.stop(); len(again) != 2 {
		t.Fatalf("a second stop returned %v", again)
	}

	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := sampleRSS(t.Context(), time.Millisecond, [][]int{{gone.Process.Pid}}).stop(); err == nil {
		t.Fatal("no error for a process that has exited")
	}
}
