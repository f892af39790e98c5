package helmsource_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/vidra-operator/vidra/internal/source/helmsource"
	"github.com/vidra-operator/vidra/internal/test/helmrepo"
	"github.com/vidra-operator/vidra/internal/test/ociregistry"
)

func TestOCIChartsResolveByTagAndRangeAndAreFetchedOnce(t *testing.T) {
	reg := ociregistry.New(t)
	var url string
	for _, v := range []string{"1.0.0", "1.1.0", "2.0.0-rc.1"} {
		url = helmrepo.PushOCI(t, reg, "charts", helmrepo.Chart(t, helmrepo.CapsChart, v))
	}
	c := newClient(t, newClock())
	s := helmsource.Source{RepoURL: url, Chart: helmrepo.CapsChart, InsecureHTTP: true}

	for want, expected := range map[string]string{"": "1.1.0", "1.0.0": "1.0.0", "v1.0.0": "1.0.0", "~1.0": "1.0.0", ">=2.0.0-0": "2.0.0-rc.1"} {
		s.Version = want
		v, err := c.Resolve(t.Context(), s)
		if err != nil {
			t.Fatalf("Resolve(%q): %v", want, err)
		}
		if v.Version != expected || !strings.HasPrefix(v.Digest, "sha256:") || v.URL != url+"/caps-chart@"+v.Digest {
			t.Fatalf("Resolve(%q) = %+v, want version %s at %s/caps-chart@<digest>", want, v, expected, url)
		}
	}

	s.Version = "1.1.0"
	v, err := c.Resolve(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			ch, err := c.Fetch(t.Context(), s, v)
			if err != nil {
				t.Error(err)
				return
			}
			if ch.Name() != helmrepo.CapsChart || ch.Metadata.Version != "1.1.0" {
				t.Errorf("fetched %s %s", ch.Name(), ch.Metadata.Version)
			}
		})
	}
	wg.Wait()
	if c.ChartFetches() != 1 || reg.BlobGets("charts/caps-chart") != 1 {
		t.Fatalf("pulled %d times, %d blob GETs; want 1, 1", c.ChartFetches(), reg.BlobGets("charts/caps-chart"))
	}
}

func TestOCIBuildMetadataIsAnUnderscoreInTheTag(t *testing.T) {
	reg := ociregistry.New(t)
	url := helmrepo.PushOCI(t, reg, "charts", helmrepo.Chart(t, helmrepo.CapsChart, "1.0.0+build.7"))
	c := newClient(t, newClock())
	s := helmsource.Source{RepoURL: url, Chart: helmrepo.CapsChart, Version: "1.0.0+build.7", InsecureHTTP: true}
	v, err := c.Resolve(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	if v.Version != "1.0.0+build.7" {
		t.Fatalf("version %q, want 1.0.0+build.7", v.Version)
	}
	ch, err := c.Fetch(t.Context(), s, v)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != "1.0.0+build.7" {
		t.Fatalf("fetched version %q", ch.Metadata.Version)
	}
}

func TestOCIErrorsMapToThisPackages(t *testing.T) {
	reg := ociregistry.New(t)
	url := helmrepo.PushOCI(t, reg, "charts", helmrepo.Chart(t, helmrepo.CapsChart, "1.0.0"))
	c := newClient(t, newClock())
	s := helmsource.Source{RepoURL: url, Chart: helmrepo.CapsChart, Version: "9.9.9", InsecureHTTP: true}
	_, err := c.Resolve(t.Context(), s)
	requireErrorAs[*helmsource.NotFoundError](t, err, "9.9.9")

	s.Version, s.InsecureHTTP = "", false
	_, err = c.Resolve(t.Context(), s)
	requireErrorAs[*helmsource.InvalidError](t, err, "insecureAllowHTTP")

	reg.RequireBasicAuth("alice", "secret")
	s.InsecureHTTP = true
	_, err = c.Resolve(t.Context(), s)
	if !helmsource.IsAuthError(err) {
		t.Fatalf("Resolve without credentials = %v, want an auth error", err)
	}
	s.Username, s.Password = "alice", "secret"
	if _, err := c.Resolve(t.Context(), s); err != nil {
		t.Fatal(err)
	}
}

func TestOCIWithoutACacheIsRefused(t *testing.T) {
	c := helmsource.New(helmsource.Options{})
	_, err := c.Resolve(t.Context(), helmsource.Source{RepoURL: "oci://registry.example/charts", Chart: "a"})
	requireErrorAs[*helmsource.InvalidError](t, err, "not enabled")
}
