package fanout

import (
	"testing"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// A template cannot say who asked for the VidraResources a sync makes: only the API
// server records that.
func TestATemplateCannotNameTheRequester(t *testing.T) {
	tpl := map[string]string{
		vidrav1alpha1.RequestedByAnnotation:       "system:admin",
		vidrav1alpha1.RequestedByGroupsAnnotation: "system:masters",
		"team": "web",
	}
	got := withoutRequester(tpl)
	if _, ok := got[vidrav1alpha1.RequestedByAnnotation]; ok || got[vidrav1alpha1.RequestedByGroupsAnnotation] != "" || got["team"] != "web" {
		t.Errorf("withoutRequester = %v", got)
	}
	if tpl[vidrav1alpha1.RequestedByAnnotation] != "system:admin" {
		t.Error("the sync's template was changed")
	}
}
