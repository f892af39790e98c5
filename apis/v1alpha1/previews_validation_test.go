package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// A GitSync's previews and ref name are checked at kubectl apply; maxRefs defaults to 5.
func TestPreviewsAreValidatedByTheAPIServer(t *testing.T) {
	ctx := context.Background()
	gitSync := func(mutate func(*vidrav1alpha1.GitSync)) *vidrav1alpha1.GitSync {
		gs := &vidrav1alpha1.GitSync{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "validation-"},
			Spec: vidrav1alpha1.GitSyncSpec{Source: vidrav1alpha1.GitSource{URL: "https://git.example.com/web.git"},
				Previews: &vidrav1alpha1.Previews{Refs: []string{"refs/pull/*/head"}}},
		}
		mutate(gs)
		return gs
	}
	refused := map[string]*vidrav1alpha1.GitSync{
		`spec.previews.refs[0]: Invalid value: "heads/preview/*"`: gitSync(func(gs *vidrav1alpha1.GitSync) { gs.Spec.Previews.Refs = []string{"heads/preview/*"} }),
		"spec.previews.refs: Required value":                      gitSync(func(gs *vidrav1alpha1.GitSync) { gs.Spec.Previews.Refs = nil }),
		"spec.previews.maxRefs: Invalid value":                    gitSync(func(gs *vidrav1alpha1.GitSync) { gs.Spec.Previews.MaxRefs = 50 }),
		"name is a full Git reference name": gitSync(func(gs *vidrav1alpha1.GitSync) {
			gs.Spec.Source.Ref = &vidrav1alpha1.GitRef{Name: "pull/1/head"}
		}),
		"set at most one of branch, tag, semver, commit and name": gitSync(func(gs *vidrav1alpha1.GitSync) {
			gs.Spec.Source.Ref = &vidrav1alpha1.GitRef{Name: "refs/pull/1/head", Branch: "main"}
		}),
	}
	for want, gs := range refused {
		err := hub.Client.Create(ctx, gs, client.DryRunAll)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("create = %v, want Invalid saying %q", err, want)
		}
	}
	ok := gitSync(func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Source.Ref = &vidrav1alpha1.GitRef{Name: "refs/merge-requests/1/head"}
	})
	if err := hub.Client.Create(ctx, ok, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if ok.Spec.Previews.MaxRefs != 5 {
		t.Errorf("maxRefs defaults to %d, want 5", ok.Spec.Previews.MaxRefs)
	}
}
