package main

import (
	"strings"
	"testing"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// kindsOf names the kinds a reference may be, VidraResource first.
func kindsOf(r reference) []string {
	var kinds []string
	if r.vidraResource {
		kinds = append(kinds, "VidraResource")
	}
	for _, k := range r.syncKinds {
		kinds = append(kinds, k.Kind)
	}
	return kinds
}

func TestANameIsReadAsAVidraResourceOrAnyKindOfSync(t *testing.T) {
	for _, tc := range []struct {
		arg       string
		syncsOnly bool
		want      string // kinds, comma-separated
	}{
		{"web", false, "VidraResource,InfrahubSync,GitSync,OCISync,HelmSync"},
		{"web", true, "InfrahubSync,GitSync,OCISync,HelmSync"},
		{"vr/web", false, "VidraResource"},
		{"VidraResources/web", false, "VidraResource"},
		{"ihs/web", false, "InfrahubSync"},
		{"infrahubsync/web", true, "InfrahubSync"},
		{"gs/web", false, "GitSync"},
		{"gitsync/web", true, "GitSync"},
		{"GitSyncs/web", true, "GitSync"},
		{"ocis/web", false, "OCISync"},
		{"ocisync/web", true, "OCISync"},
		{"ocisyncs/web", false, "OCISync"},
		{"hs/web", false, "HelmSync"},
		{"helmsync/web", true, "HelmSync"},
		{"HelmSyncs/web", false, "HelmSync"},
	} {
		ref, err := parseReference(tc.arg, tc.syncsOnly)
		if err != nil {
			t.Errorf("%s (syncs only %t): %v", tc.arg, tc.syncsOnly, err)
			continue
		}
		if got := strings.Join(kindsOf(ref), ","); got != tc.want || ref.name != "web" {
			t.Errorf("%s (syncs only %t): name %q, kinds %s; want web, %s", tc.arg, tc.syncsOnly, ref.name, got, tc.want)
		}
	}
}

func TestANameOfAnotherKindIsRefusedWithTheKindsThatAreTaken(t *testing.T) {
	for _, tc := range []struct {
		arg       string
		syncsOnly bool
	}{
		{"deployment/web", false}, {"vr/web", true}, {"gs/", false}, {"gs/web/x", false}, {"", true},
	} {
		_, err := parseReference(tc.arg, tc.syncsOnly)
		if err == nil {
			t.Errorf("%q (syncs only %t) was taken", tc.arg, tc.syncsOnly)
			continue
		}
		for _, want := range []string{"InfrahubSync (ihs/NAME)", "GitSync (gs/NAME)", "OCISync (ocis/NAME)", "HelmSync (hs/NAME)"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q: %v does not say %q", tc.arg, err, want)
			}
		}
		if strings.Contains(err.Error(), "vr/NAME") == tc.syncsOnly {
			t.Errorf("%q (syncs only %t): %v", tc.arg, tc.syncsOnly, err)
		}
	}
}

func TestTheSyncColumnNamesTheSyncByItsShortKind(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{vidrav1alpha1.InfrahubSyncLabel: "edge"}, "ihs/edge"},
		{map[string]string{vidrav1alpha1.GitSyncLabel: "web"}, "gs/web"},
		{map[string]string{vidrav1alpha1.OCISyncLabel: "web", "team": "a"}, "ocis/web"},
		{map[string]string{vidrav1alpha1.HelmSyncLabel: "ingress"}, "hs/ingress"},
		{map[string]string{"team": "a"}, none},
		{nil, none},
	} {
		if got := syncColumn(tc.labels); got != tc.want {
			t.Errorf("labels %v: SYNC %q, want %q", tc.labels, got, tc.want)
		}
	}
}
