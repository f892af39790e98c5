package infrahub_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vidra-operator/vidra/internal/source/infrahub"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
)

const manifestYAML = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  site: %s\n"

// seeded is a double with artifact "web" rendered for three targets on main.
func seeded(t *testing.T, opts infrahubtest.Options) *infrahubtest.Server {
	t.Helper()
	s := infrahubtest.New(opts)
	t.Cleanup(s.Close)
	for i, site := range []string{"paris", "lyon", "nice"} {
		s.Put("main", infrahubtest.Artifact{
			ID: fmt.Sprintf("art-%d", i), Name: "web", Content: fmt.Sprintf(manifestYAML, site),
			TargetID: "node-" + site, TargetLabel: site, TargetKind: "InfraCluster", DefinitionID: "def-1", DefinitionName: "web-def",
		})
	}
	s.Put("main", infrahubtest.Artifact{ID: "art-other", Name: "dns", Content: "x: 1\n"})
	return s
}

func newClient(t *testing.T, s *infrahubtest.Server, creds infrahub.Credentials) *infrahub.Client {
	t.Helper()
	hc := *s.Client()
	hc.Timeout = time.Second
	c, err := infrahub.New(s.URL(), infrahub.Options{HTTPClient: &hc, Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var mainBranch = infrahub.Snapshot{Branch: "main"}

func TestListArtifactsByName(t *testing.T) {
	s := seeded(t, infrahubtest.Options{Token: "tok"})
	arts, err := newClient(t, s, infrahub.Credentials{Token: "tok"}).ListArtifacts(context.Background(), mainBranch, "web", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(arts) != 3 {
		t.Fatalf("listed %d artifacts, want the 3 named web: %+v", len(arts), arts)
	}
	a := arts[0]
	if a.ID != "art-0" || a.Name != "web" || a.Status != infrahub.StatusReady || a.Target.Label != "paris" ||
		a.Target.Kind != "InfraCluster" || a.Definition != "web-def" || len(a.Checksum) != 32 {
		t.Errorf("artifact = %+v", a)
	}
}

func TestListArtifactsPagesThroughLargeListings(t *testing.T) {
	s := infrahubtest.New(infrahubtest.Options{AllowAnonymous: true})
	t.Cleanup(s.Close)
	const n = 450
	for i := range n {
		s.Put("main", infrahubtest.Artifact{ID: fmt.Sprintf("art-%03d", i), Name: "web", Content: "x"})
	}
	arts, err := newClient(t, s, infrahub.Credentials{}).ListArtifacts(context.Background(), mainBranch, "web", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(arts) != n || arts[n-1].ID != "art-449" {
		t.Fatalf("listed %d artifacts, want %d", len(arts), n)
	}
	if got := s.GraphQLRequests(); got != 3 {
		t.Errorf("%d GraphQL requests, want 3 pages", got)
	}
}

// A listing that fails is an error, never zero artifacts.
func TestListArtifactsFailuresAreErrors(t *testing.T) {
	tests := []struct {
		name   string
		fault  infrahubtest.Fault
		branch string
		want   string
	}{
		{"GraphQL errors with HTTP 200", infrahubtest.Fault{Path: "/graphql", GraphQLErrors: []string{"Cannot query field 'CoreArtifact'"}}, "main", "GraphQL errors: Cannot query field"},
		{"server error", infrahubtest.Fault{Path: "/graphql", Status: http.StatusInternalServerError}, "main", "HTTP 500"},
		{"body that is not JSON", infrahubtest.Fault{Path: "/graphql", Body: "<html>proxy error</html>"}, "main", "not JSON"},
		{"JSON without data", infrahubtest.Fault{Path: "/graphql", Body: `{"data":{}}`}, "main", "no data.CoreArtifact"},
		{"unknown branch", infrahubtest.Fault{}, "nope", "HTTP 404: Branch: nope not found."},
		{"timeout", infrahubtest.Fault{Path: "/graphql", Delay: 5 * time.Second}, "main", "Client.Timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := seeded(t, infrahubtest.Options{AllowAnonymous: true})
			s.SetFault(tt.fault)
			arts, err := newClient(t, s, infrahub.Credentials{}).ListArtifacts(context.Background(), infrahub.Snapshot{Branch: tt.branch}, "web", nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ListArtifacts = %d artifacts, %v; want an error with %q", len(arts), err, tt.want)
			}
			if arts != nil {
				t.Errorf("a failed listing returned artifacts: %+v", arts)
			}
		})
	}
}

func TestListArtifactsOnABranchAndAtATime(t *testing.T) {
	clock := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s := seeded(t, infrahubtest.Options{AllowAnonymous: true, Now: func() time.Time { return clock }})
	c := newClient(t, s, infrahub.Credentials{})
	ctx := context.Background()

	s.CreateBranch("dev")
	clock = clock.Add(time.Hour)
	s.Put("dev", infrahubtest.Artifact{ID: "art-0", Name: "web", Content: "dev: true\n", TargetLabel: "paris"})
	s.Delete("main", "art-2")

	dev, err := c.ListArtifacts(ctx, infrahub.Snapshot{Branch: "dev"}, "web", nil)
	if err != nil {
		t.Fatal(err)
	}
	onMain, err := c.ListArtifacts(ctx, mainBranch, "web", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(dev) != 3 || len(onMain) != 2 || dev[0].Checksum == onMain[0].Checksum {
		t.Fatalf("branches are not separate: dev %+v, main %+v", dev, onMain)
	}
	before, err := infrahub.At("2026-01-01T12:30:00Z", clock)
	if err != nil {
		t.Fatal(err)
	}
	past, err := c.ListArtifacts(ctx, infrahub.Snapshot{Branch: "main", At: before}, "web", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(past) != 3 {
		t.Errorf("main at %s lists %d artifacts, want the 3 of then", before, len(past))
	}
	content, err := c.Download(ctx, infrahub.Snapshot{Branch: "main", At: before}, past[2], nil)
	if err != nil || !strings.Contains(string(content), "nice") {
		t.Errorf("download of a deleted artifact as it was = %q, %v", content, err)
	}
}

func TestDownloadVerifiesTheChecksum(t *testing.T) {
	s := seeded(t, infrahubtest.Options{AllowAnonymous: true})
	c := newClient(t, s, infrahub.Credentials{})
	ctx := context.Background()
	arts, err := c.ListArtifacts(ctx, mainBranch, "web", nil)
	if err != nil {
		t.Fatal(err)
	}
	content, err := c.Download(ctx, mainBranch, arts[1], nil)
	if err != nil || string(content) != fmt.Sprintf(manifestYAML, "lyon") {
		t.Fatalf("download = %q, %v", content, err)
	}

	s.Put("main", infrahubtest.Artifact{ID: "art-1", Name: "web", Content: "tampered: true\n", Checksum: arts[1].Checksum})
	content, err = c.Download(ctx, mainBranch, arts[1], nil)
	var mismatch *infrahub.ChecksumMismatchError
	if !errors.As(err, &mismatch) || content != nil {
		t.Fatalf("download of content that does not match its checksum = %q, %v; want a ChecksumMismatchError", content, err)
	}
	if mismatch.ID != "art-1" || mismatch.Want != arts[1].Checksum {
		t.Errorf("mismatch = %+v", mismatch)
	}
	if _, err := c.Download(ctx, mainBranch, infrahub.Artifact{ID: "missing"}, nil); err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Errorf("download of an unknown artifact = %v, want HTTP 404", err)
	}
}

func TestLoginOnceAndRefreshAnExpiredToken(t *testing.T) {
	s := seeded(t, infrahubtest.Options{Users: map[string]string{"vidra": "s3cret"}})
	c := newClient(t, s, infrahub.Credentials{Username: "vidra", Password: "s3cret"})
	ctx := context.Background()
	for range 3 {
		if _, err := c.ListArtifacts(ctx, mainBranch, "web", nil); err != nil {
			t.Fatal(err)
		}
	}
	if s.Logins() != 1 {
		t.Errorf("%d logins for 3 listings, want 1", s.Logins())
	}
	s.ExpireAccessTokens()
	if _, err := c.ListArtifacts(ctx, mainBranch, "web", nil); err != nil {
		t.Fatalf("listing after the access token expired: %v", err)
	}
	if s.Refreshes() != 1 || s.Logins() != 1 {
		t.Errorf("after expiry: %d refreshes, %d logins; want 1 and 1", s.Refreshes(), s.Logins())
	}
}

func TestAuthenticationFailures(t *testing.T) {
	s := seeded(t, infrahubtest.Options{Token: "tok", Users: map[string]string{"vidra": "s3cret"}})
	ctx := context.Background()
	for _, tt := range []struct {
		name  string
		creds infrahub.Credentials
		want  string
	}{
		{"anonymous when anonymous access is off", infrahub.Credentials{}, "Authentication is required"},
		{"wrong token", infrahub.Credentials{Token: "nope"}, "Invalid token"},
		{"wrong password", infrahub.Credentials{Username: "vidra", Password: "guess"}, "Incorrect password"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newClient(t, s, tt.creds).ListArtifacts(ctx, mainBranch, "web", nil)
			if !infrahub.IsAuthError(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ListArtifacts = %v, want an authentication error with %q", err, tt.want)
			}
			for _, secret := range []string{"nope", "guess", "s3cret"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q shows a credential", err)
				}
			}
		})
	}
	if got := fmt.Sprint(infrahub.Credentials{Username: "vidra", Password: "s3cret"}, infrahub.Credentials{Token: "tok"}); strings.Contains(got, "s3cret") || strings.Contains(got, "tok}") {
		t.Errorf("credentials print as %q", got)
	}
}

func TestListArtifactsByStoredQuery(t *testing.T) {
	s := seeded(t, infrahubtest.Options{AllowAnonymous: true})
	arts, err := newClient(t, s, infrahub.Credentials{}).ListArtifactsByQuery(context.Background(), mainBranch, "ArtifactIDs", "web", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(arts) != 3 || arts[0].Status != infrahub.StatusReady || arts[0].Target.Label != "paris" || len(arts[0].Checksum) != 32 {
		t.Fatalf("stored query listed %+v", arts)
	}
	_, err = newClient(t, s, infrahub.Credentials{}).ListArtifactsByQuery(context.Background(), mainBranch, "Missing", "web", nil)
	if err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Errorf("unknown stored query = %v, want HTTP 404", err)
	}
}
