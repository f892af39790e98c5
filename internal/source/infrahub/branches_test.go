package infrahub_test

import (
	"context"
	"slices"
	"testing"

	"github.com/vidra-operator/vidra/internal/source/infrahub"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
)

func TestListBranchesNamesEveryBranch(t *testing.T) {
	s := seeded(t, infrahubtest.Options{Token: "tok"})
	s.CreateBranch("feature-b")
	s.CreateBranch("feature-a")
	got, err := newClient(t, s, infrahub.Credentials{Token: "tok"}).ListBranches(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"feature-a", "feature-b", "main"}; !slices.Equal(got, want) {
		t.Errorf("ListBranches = %v, want %v", got, want)
	}
	if _, err := newClient(t, s, infrahub.Credentials{Token: "wrong"}).ListBranches(context.Background()); !infrahub.IsAuthError(err) {
		t.Errorf("ListBranches with a refused token = %v, want an authentication error", err)
	}
}
