package ocisource_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/vidra-operator/vidra/internal/source/ocisource"
	"github.com/vidra-operator/vidra/internal/test/ociregistry"
)

var manifests = map[string]string{"deploy/app.yaml": "kind: ConfigMap\n"}

func TestResolveTagGivesItsManifestDigest(t *testing.T) {
	reg := ociregistry.New(t)
	digest := reg.Push(t, "app", "v1.0.0", manifests)
	cache := newCache(t)

	rev, err := cache.Resolve(t.Context(), ocisource.Remote{URL: reg.URL("app"), InsecureHTTP: true}, ocisource.Ref{Tag: "v1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	if rev.Tag != "v1.0.0" || rev.Digest != digest {
		t.Errorf("got %+v, want v1.0.0@%s", rev, digest)
	}
	if got, want := rev.String(), "v1.0.0@"+digest; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestResolveWithoutRefTakesLatest(t *testing.T) {
	reg := ociregistry.New(t)
	reg.Push(t, "app", "v1.0.0", manifests)
	latest := reg.Push(t, "app", "latest", map[string]string{"a.yaml": "a: 1\n"})
	cache := newCache(t)

	rev, err := cache.Resolve(t.Context(), ocisource.Remote{URL: reg.URL("app"), InsecureHTTP: true}, ocisource.Ref{})
	if err != nil {
		t.Fatal(err)
	}
	if rev.Tag != "latest" || rev.Digest != latest {
		t.Errorf("got %+v, want latest@%s", rev, latest)
	}
}

func TestResolveSemverTakesNewestMatchingTag(t *testing.T) {
	reg := ociregistry.New(t)
	want := ""
	for _, tag := range []string{"v1.0.0", "1.2.0", "v1.10.0", "1.11.0-rc.1", "2.0.0", "latest", "20240101", "1.9"} {
		d := reg.Push(t, "app", tag, map[string]string{"version.txt": tag})
		if tag == "v1.10.0" {
			want = d
		}
	}
	cache := newCache(t)

	rev, err := cache.Resolve(t.Context(), ocisource.Remote{URL: reg.URL("app"), InsecureHTTP: true}, ocisource.Ref{SemVer: ">=1.0.0 <2.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	if rev.Tag != "v1.10.0" || rev.Digest != want {
		t.Errorf("got %+v, want v1.10.0@%s", rev, want)
	}
}

func TestResolveSemverWithoutMatchIsNotFound(t *testing.T) {
	reg := ociregistry.New(t)
	reg.Push(t, "app", "v1.0.0", manifests)
	cache := newCache(t)

	_, err := cache.Resolve(t.Context(), ocisource.Remote{URL: reg.URL("app"), InsecureHTTP: true}, ocisource.Ref{SemVer: ">=3"})
	requireNotFound(t, err, `semver ">=3"`)
}

func TestResolveMissingTagIsNotFound(t *testing.T) {
	reg := ociregistry.New(t)
	reg.Push(t, "app", "v1.0.0", manifests)
	cache := newCache(t)

	_, err := cache.Resolve(t.Context(), ocisource.Remote{URL: reg.URL("app"), InsecureHTTP: true}, ocisource.Ref{Tag: "v9"})
	requireNotFound(t, err, `tag "v9"`)
}

func TestResolveMissingRepositoryIsNotFound(t *testing.T) {
	reg := ociregistry.New(t)
	cache := newCache(t)
	src := ocisource.Remote{URL: reg.URL("nothing/here"), InsecureHTTP: true}

	_, err := cache.Resolve(t.Context(), src, ocisource.Ref{Tag: "v1"})
	requireNotFound(t, err, "repository")
	_, err = cache.Resolve(t.Context(), src, ocisource.Ref{SemVer: "1.x"})
	requireNotFound(t, err, "repository")
}

func TestResolveDownloadsNoContent(t *testing.T) {
	reg := ociregistry.New(t)
	reg.Push(t, "app", "v1.0.0", manifests)
	cache := newCache(t)
	src := ocisource.Remote{URL: reg.URL("app"), InsecureHTTP: true}

	for _, ref := range []ocisource.Ref{{Tag: "v1.0.0"}, {SemVer: "^1"}} {
		if _, err := cache.Resolve(t.Context(), src, ref); err != nil {
			t.Fatal(err)
		}
	}
	if reg.BlobGets("app") != 0 || reg.ManifestGets("app") != 0 {
		t.Errorf("Resolve fetched %d blobs and %d manifests, want none", reg.BlobGets("app"), reg.ManifestGets("app"))
	}
	if cache.Pulls() != 0 {
		t.Errorf("Pulls() = %d after Resolve alone", cache.Pulls())
	}
}

// A digest is still asked of the registry, with the caller's credentials: no caller
// reads, through the cache, an artifact its credentials do not open.
func TestResolveDigestAsksTheRegistry(t *testing.T) {
	reg := ociregistry.New(t)
	reg.RequireBasicAuth("deployer", "s3cret-pass")
	digest := reg.Push(t, "app", "v1", manifests)
	cache := newCache(t)
	src := ocisource.Remote{URL: reg.URL("app"), InsecureHTTP: true, Username: "deployer", Password: "s3cret-pass"}

	rev, err := cache.Resolve(t.Context(), src, ocisource.Ref{Digest: digest})
	if err != nil {
		t.Fatal(err)
	}
	if rev.Tag != "" || rev.Digest != digest || rev.String() != digest {
		t.Errorf("got %+v (%s), want the digest alone", rev, rev)
	}
	if reg.BlobGets("app") != 0 {
		t.Errorf("Resolve of a digest fetched %d blobs, want none", reg.BlobGets("app"))
	}
	_, err = cache.Resolve(t.Context(), ocisource.Remote{URL: reg.URL("app"), InsecureHTTP: true}, ocisource.Ref{Digest: digest})
	requireAuthError(t, err)
	missing := "sha256:" + strings.Repeat("0", 64)
	_, err = cache.Resolve(t.Context(), src, ocisource.Ref{Digest: missing})
	requireNotFound(t, err, missing)
}

func TestResolveRefusesWhatCannotWork(t *testing.T) {
	cache := newCache(t)
	ok := "oci://127.0.0.1:1/app"
	for name, c := range map[string]struct {
		url string
		ref ocisource.Ref
	}{
		"https URL":        {url: "https://127.0.0.1:1/app"},
		"no repository":    {url: "oci://127.0.0.1:1"},
		"tag in URL":       {url: "oci://127.0.0.1:1/app:v1"},
		"two selectors":    {url: ok, ref: ocisource.Ref{Tag: "v1", SemVer: "^1"}},
		"short digest":     {url: ok, ref: ocisource.Ref{Digest: "sha256:abc"}},
		"bad semver":       {url: ok, ref: ocisource.Ref{SemVer: "not a range"}},
		"credentials":      {url: "oci://user:s3cret@127.0.0.1:1/app"},
		"query in the URL": {url: "oci://127.0.0.1:1/app?token=s3cret"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := cache.Resolve(t.Context(), ocisource.Remote{URL: c.url, InsecureHTTP: true}, c.ref)
			var invalid *ocisource.InvalidError
			if !errors.As(err, &invalid) {
				t.Fatalf("want *InvalidError, got %T: %v", err, err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error shows the credential: %v", err)
			}
		})
	}
}

func requireNotFound(t *testing.T, err error, what string) {
	t.Helper()
	var nf *ocisource.NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("want *NotFoundError, got %T: %v", err, err)
	}
	if !strings.Contains(err.Error(), what) {
		t.Errorf("error %q does not name %s", err, what)
	}
}
