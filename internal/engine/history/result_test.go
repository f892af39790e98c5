package history_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/history"
)

func TestCurrentResultSaysHowTheRevisionStands(t *testing.T) {
	vr := &vidrav1alpha1.VidraResource{}
	if got := history.CurrentResult(vr); got != "Unknown" {
		t.Errorf("not judged yet = %q", got)
	}
	vr.Status.Conditions = []metav1.Condition{{Type: vidrav1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: vidrav1alpha1.ReasonSucceeded}}
	if got := history.CurrentResult(vr); got != "Ready" {
		t.Errorf("ready = %q", got)
	}
	vr.Status.Conditions[0].Status, vr.Status.Conditions[0].Reason = metav1.ConditionFalse, vidrav1alpha1.ReasonApplyFailed
	vr.Status.Conditions[0].Message = "apply ConfigMap web/é: " + strings.Repeat("é", 300)
	got := history.CurrentResult(vr)
	if !strings.HasPrefix(got, "ApplyFailed: apply ConfigMap web/é: ") || len(got) > 200 || !utf8.ValidString(got) || !strings.HasSuffix(got, "...") {
		t.Errorf("failed = %q (%d bytes, valid UTF-8 %v)", got, len(got), utf8.ValidString(got))
	}
}
