package admissionguard

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

var t0 = time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)

func TestAGapRunsFromJustBeforeThePoliciesWentToJustAfterTheyCameBack(t *testing.T) {
	l := newGapLog()
	bound := []string{"policy", "binding/1"}
	l.observe(true, bound, t0)
	l.observe(true, bound, t0.Add(time.Minute))
	if _, gaps := l.record(); len(gaps) != 0 {
		t.Fatalf("gaps %v while always in force", gaps)
	}
	l.observe(false, nil, t0.Add(2*time.Minute))
	l.observe(false, nil, t0.Add(3*time.Minute))
	l.observe(true, []string{"policy", "binding-again/1"}, t0.Add(4*time.Minute))
	_, gaps := l.record()
	want := Gap{From: t0.Add(time.Minute - gapMargin), To: t0.Add(4*time.Minute + gapMargin)}
	if len(gaps) != 1 || !gapsEqual(gaps, []Gap{want}) {
		t.Fatalf("gaps %v, want [%v]", gaps, want)
	}
	for at, covered := range map[time.Time]bool{
		t0:                          false,
		t0.Add(90 * time.Second):    true,
		t0.Add(4 * time.Minute):     true,
		t0.Add(5 * time.Minute):     false,
		t0.Add(time.Minute - 20e9):  false,
		t0.Add(3*time.Minute + 1e9): true,
	} {
		if _, got := l.covering(at, t0.Add(time.Hour)); got != covered {
			t.Errorf("written at %s: in a gap %t, want %t", at.Format(time.TimeOnly), got, covered)
		}
	}
}

func TestABindingReplacedBetweenTwoLooksIsAGap(t *testing.T) {
	l := newGapLog()
	l.observe(true, []string{"policy", "binding/1"}, t0)
	// Deleted and created again, or its actions changed and changed back, unseen.
	l.observe(true, []string{"policy", "binding/3"}, t0.Add(time.Minute))
	if _, found := l.covering(t0.Add(30*time.Second), t0.Add(time.Hour)); !found {
		t.Error("a write between the two looks is trusted")
	}
}

func TestARestartCannotTellWhenThePoliciesWent(t *testing.T) {
	stored := []string{"policy", "binding/1"}
	gone := newGapLog()
	gone.seed(stored, nil)
	gone.observe(false, nil, t0)
	gone.observe(true, []string{"policy", "binding-again/1"}, t0.Add(time.Minute))
	replaced := newGapLog()
	replaced.seed(stored, nil)
	replaced.observe(true, []string{"policy", "binding-again/1"}, t0)
	kept := newGapLog()
	kept.seed(stored, nil)
	kept.observe(true, stored, t0)
	longAgo := t0.Add(-365 * 24 * time.Hour)
	for name, l := range map[string]*gapLog{"gone at start": gone, "replaced while stopped": replaced} {
		if g, found := l.covering(longAgo, t0.Add(time.Hour)); !found || !g.From.IsZero() {
			t.Errorf("%s: a write a year before is trusted (gap %v)", name, g)
		}
	}
	if _, gaps := kept.record(); len(gaps) != 0 {
		t.Errorf("the same bindings after a restart: gaps %v", gaps)
	}
	fresh := newGapLog()
	fresh.observe(true, stored, t0)
	if _, gaps := fresh.record(); len(gaps) != 0 {
		t.Errorf("the first look ever, all in force: gaps %v", gaps)
	}
}

func TestTheRecordIsBounded(t *testing.T) {
	l := newGapLog()
	for i := range maxGaps + 5 {
		at := t0.Add(time.Duration(i) * time.Hour)
		l.observe(true, []string{"p"}, at)
		l.observe(false, nil, at.Add(time.Minute))
		l.observe(true, []string{"p"}, at.Add(2*time.Minute))
	}
	_, gaps := l.record()
	if len(gaps) != maxGaps {
		t.Fatalf("%d gaps kept, want %d", len(gaps), maxGaps)
	}
	if _, found := l.covering(t0.Add(time.Minute), t0.Add(100*time.Hour)); !found {
		t.Error("the oldest gap was forgotten, not merged")
	}
}

func TestWrittenAtIsTheLastWriteOfTheSpecOrTheStamp(t *testing.T) {
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }
	fields := metav1.NewFieldsV1
	obj := &metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "kubectl", Time: at(time.Minute), FieldsV1: fields(`{"f:spec":{"f:interval":{}}}`)},
		{Manager: "vidra", Time: at(time.Hour), FieldsV1: fields(`{"f:status":{"f:conditions":{}}}`), Subresource: "status"},
		{Manager: "labeller", Time: at(2 * time.Hour), FieldsV1: fields(`{"f:metadata":{"f:labels":{"f:team":{}}}}`)},
		{Manager: "stamper", Time: at(3 * time.Minute), FieldsV1: fields(`{"f:metadata":{"f:annotations":{"f:` + vidrav1alpha1.RequestedByAnnotation + `":{}}}}`)},
	}}
	if got := WrittenAt(obj); !got.Equal(t0.Add(3 * time.Minute)) {
		t.Errorf("WrittenAt = %s, want the stamp's write at %s", got, t0.Add(3*time.Minute))
	}
	KeepWrittenAt(obj)
	if got := WrittenAt(obj); len(obj.ManagedFields) != 1 || !got.Equal(t0.Add(3*time.Minute)) {
		t.Errorf("kept %d entries, WrittenAt %s", len(obj.ManagedFields), got)
	}
	none := &metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}
	if KeepWrittenAt(none); none.ManagedFields != nil || !WrittenAt(none).IsZero() {
		t.Errorf("an object whose fields say no time: %+v", none.ManagedFields)
	}
}
