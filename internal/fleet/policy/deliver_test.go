package policy

import (
	"reflect"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// The stamps as the chart's admission policy writes them: separators in names escaped.
func TestRequesterOfReadsEveryStamp(t *testing.T) {
	who, ok := RequesterOf(map[string]string{
		vidrav1alpha1.RequestedByAnnotation:       "system:serviceaccount:team-a:ci",
		vidrav1alpha1.RequestedByGroupsAnnotation: "system:serviceaccounts,odd%2Cgroup%25",
		vidrav1alpha1.RequestedByUIDAnnotation:    "6f1c-uid",
		vidrav1alpha1.RequestedByExtraAnnotation:  "authentication.kubernetes.io/credential-id=JTI%3Dabc;example.com/a%3Bb=x%2Cy,z",
	})
	want := Requester{
		User: "system:serviceaccount:team-a:ci", UID: "6f1c-uid",
		Groups: []string{"system:serviceaccounts", "odd,group%"},
		Extra:  map[string][]string{"authentication.kubernetes.io/credential-id": {"JTI=abc"}, "example.com/a;b": {"x,y", "z"}},
	}
	if !ok || !reflect.DeepEqual(who, want) {
		t.Fatalf("RequesterOf = %+v, %v; want %+v", who, ok, want)
	}
	spec := who.ReviewSpec()
	if spec.User != want.User || spec.UID != want.UID || !reflect.DeepEqual(spec.Groups, want.Groups) ||
		!reflect.DeepEqual(spec.Extra["example.com/a;b"], authorizationv1.ExtraValue{"x,y", "z"}) || len(spec.Extra) != 2 {
		t.Errorf("ReviewSpec = %+v: the SubjectAccessReview must carry all of who asked", spec)
	}
	other := who
	other.Extra = map[string][]string{"authentication.kubernetes.io/credential-id": {"JTI=other"}}
	if who.Key() == other.Key() {
		t.Error("two requesters with other extra attributes share a key: one's answer would serve the other")
	}
	if _, ok := RequesterOf(map[string]string{vidrav1alpha1.RequestedByGroupsAnnotation: "g"}); ok {
		t.Error("a requester without a user name was read")
	}
}
