package helmsource_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/vidra-operator/vidra/internal/source/helmsource"
	"github.com/vidra-operator/vidra/internal/test/helmrepo"
)

func TestArchivesAreFetchedFromRelativeAndAbsoluteURLs(t *testing.T) {
	for name, opts := range map[string][]helmrepo.Option{
		"relative": nil,
		"absolute": {helmrepo.WithAbsoluteURLs()},
	} {
		t.Run(name, func(t *testing.T) {
			repo := repoWith(t, helmrepo.CapsChart, []string{"1.0.0"}, opts...)
			c := newClient(t, newClock())
			s := src(repo, helmrepo.CapsChart, "1.0.0")
			v, err := c.Resolve(t.Context(), s)
			if err != nil {
				t.Fatal(err)
			}
			if want := repo.URL() + "/charts/caps-chart-1.0.0.tgz"; v.URL != want {
				t.Errorf("URL %s, want %s", v.URL, want)
			}
			if !strings.HasPrefix(v.Digest, "sha256:") {
				t.Errorf("digest %q, want sha256:…", v.Digest)
			}
			ch, err := c.Fetch(t.Context(), s, v)
			if err != nil {
				t.Fatal(err)
			}
			if ch.Name() != helmrepo.CapsChart || ch.Metadata.Version != "1.0.0" {
				t.Fatalf("fetched %s %s", ch.Name(), ch.Metadata.Version)
			}
		})
	}
}

func TestAVersionIsDownloadedOnceHoweverManyFetchIt(t *testing.T) {
	repo := repoWith(t, helmrepo.HooksChart, []string{"1.0.0"})
	c := newClient(t, newClock())
	s := src(repo, helmrepo.HooksChart, "1.0.0")
	v, err := c.Resolve(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := c.Fetch(t.Context(), s, v); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if _, err := c.Fetch(t.Context(), s, v); err != nil {
		t.Fatal(err)
	}
	if repo.ArchiveGets() != 1 || c.ChartFetches() != 1 {
		t.Fatalf("archive downloaded %d times (client counts %d), want 1", repo.ArchiveGets(), c.ChartFetches())
	}
}

func TestCredentialsGoOnlyToTheRepositorysOwnHost(t *testing.T) {
	elsewhere := repoWith(t, helmrepo.CapsChart, []string{"1.0.0"})
	// 127.0.0.1 and localhost are one machine but not one origin.
	elsewhereURL := strings.Replace(elsewhere.URL(), "127.0.0.1", "localhost", 1)
	repo := repoWith(t, helmrepo.CapsChart, []string{"1.0.0"},
		helmrepo.WithBasicAuth("alice", "secret"), helmrepo.WithArchivesAt(elsewhereURL))
	c := newClient(t, newClock())
	s := src(repo, helmrepo.CapsChart, "1.0.0")
	s.Username, s.Password = "alice", "secret"
	v, err := c.Resolve(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v.URL, elsewhereURL) {
		t.Fatalf("URL %s is not on the other host %s", v.URL, elsewhereURL)
	}
	if _, err := c.Fetch(t.Context(), s, v); err != nil {
		t.Fatal(err)
	}
	if elsewhere.ArchiveGets() != 1 {
		t.Fatalf("other host served %d archives, want 1", elsewhere.ArchiveGets())
	}
	if n := elsewhere.RequestsWithCredentials(); n != 0 {
		t.Fatalf("the other host received credentials %d times", n)
	}
	if repo.RequestsWithCredentials() == 0 {
		t.Fatal("the repository itself never received the credentials")
	}
}

func TestAnArchiveThatDoesNotMatchItsDigestIsRefused(t *testing.T) {
	repo := repoWith(t, helmrepo.CapsChart, []string{"1.0.0"})
	repo.TamperArchives()
	c := newClient(t, newClock())
	s := src(repo, helmrepo.CapsChart, "1.0.0")
	v, err := c.Resolve(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Fetch(t.Context(), s, v)
	requireErrorAs[*helmsource.InvalidError](t, err, "digest mismatch", v.Digest)
}

func TestAChartOverTheBoundIsRefused(t *testing.T) {
	repo := repoWith(t, helmrepo.HooksChart, []string{"1.0.0"})
	c := helmsource.New(helmsource.Options{Limits: helmsource.Limits{MaxChartBytes: 100}})
	s := src(repo, helmrepo.HooksChart, "1.0.0")
	v, err := c.Resolve(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Fetch(t.Context(), s, v)
	requireErrorAs[*helmsource.LimitError](t, err, "MaxChartBytes")
}

func TestArchivesNeedTheRepositorysCredentials(t *testing.T) {
	repo := repoWith(t, helmrepo.CapsChart, []string{"1.0.0"}, helmrepo.WithBasicAuth("alice", "secret"))
	c := newClient(t, newClock())
	s := src(repo, helmrepo.CapsChart, "1.0.0")
	s.Username, s.Password = "alice", "secret"
	v, err := c.Resolve(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	s.Password = "stale-secret"
	_, err = c.Fetch(t.Context(), s, v)
	if !helmsource.IsAuthError(err) {
		t.Fatalf("Fetch with a wrong password = %v, want an auth error", err)
	}
	if strings.Contains(err.Error(), "stale-secret") {
		t.Fatalf("error %q shows the password", err)
	}
}

func TestTLSRepositoriesWithTheirCA(t *testing.T) {
	repo := repoWith(t, helmrepo.CapsChart, []string{"1.0.0"}, helmrepo.WithTLS())
	c := newClient(t, newClock())
	s := helmsource.Source{RepoURL: repo.URL(), Chart: helmrepo.CapsChart}
	if _, err := c.Resolve(t.Context(), s); err == nil {
		t.Fatal("Resolve without the CA succeeded")
	}
	s.CA = repo.CA()
	v, err := c.Resolve(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Fetch(t.Context(), s, v); err != nil {
		t.Fatal(err)
	}
}
