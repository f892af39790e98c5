package ocisource_test

import (
	"strings"
	"testing"

	"github.com/vidra-operator/vidra/internal/source/ocisource"
	"github.com/vidra-operator/vidra/internal/test/ociregistry"
)

func TestARegistryWithBasicAuthNeedsTheRightCredentials(t *testing.T) {
	reg := ociregistry.New(t)
	reg.RequireBasicAuth("deployer", "s3cret-pass")
	digest := reg.Push(t, "app", "v1", manifests)
	cache := newCache(t)
	rev := ocisource.Revision{Tag: "v1", Digest: digest}

	for name, src := range map[string]ocisource.Remote{
		"no credentials":    {URL: reg.URL("app"), InsecureHTTP: true},
		"wrong credentials": {URL: reg.URL("app"), InsecureHTTP: true, Username: "deployer", Password: "s3cret-wrong"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := cache.Resolve(t.Context(), src, ocisource.Ref{Tag: "v1"})
			requireAuthError(t, err)
			_, err = cache.Resolve(t.Context(), src, ocisource.Ref{SemVer: "*"})
			requireAuthError(t, err)
			_, _, err = cache.Pull(t.Context(), src, rev)
			requireAuthError(t, err)
		})
	}

	src := ocisource.Remote{URL: reg.URL("app"), InsecureHTTP: true, Username: "deployer", Password: "s3cret-pass"}
	got, err := cache.Resolve(t.Context(), src, ocisource.Ref{Tag: "v1"})
	if err != nil || got != rev {
		t.Fatalf("Resolve = %+v, %v; want %+v", got, err, rev)
	}
	dir, release, err := cache.Pull(t.Context(), src, rev)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if got := readFile(t, dir, "deploy/app.yaml"); got != manifests["deploy/app.yaml"] {
		t.Errorf("deploy/app.yaml = %q", got)
	}
}

func requireAuthError(t *testing.T, err error) {
	t.Helper()
	if !ocisource.IsAuthError(err) {
		t.Fatalf("want an auth error, got %T: %v", err, err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error shows the password: %v", err)
	}
}
