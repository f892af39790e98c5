package ocisource_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/vidra-operator/vidra/internal/source/ocisource"
	"github.com/vidra-operator/vidra/internal/test/ociregistry"
)

// The registry client would fall back to plain http for 127.0.0.1 on its own; without
// InsecureHTTP that must fail instead.
func TestPlainHTTPIsRefusedWithoutInsecureHTTP(t *testing.T) {
	reg := ociregistry.New(t)
	reg.RequireBasicAuth("deployer", "s3cret-pass")
	digest := reg.Push(t, "app", "v1", manifests)
	before := reg.ManifestGets("app")
	cache := newCache(t)
	src := ocisource.Remote{URL: reg.URL("app"), Username: "deployer", Password: "s3cret-pass"}

	_, err := cache.Resolve(t.Context(), src, ocisource.Ref{Tag: "v1"})
	requirePlainHTTP(t, err)
	_, _, err = cache.Pull(t.Context(), src, ocisource.Revision{Digest: digest})
	requirePlainHTTP(t, err)
	if reg.ManifestGets("app") != before || reg.BlobGets("app") != 0 {
		t.Errorf("requests reached the registry over plain http")
	}
}

func TestATLSRegistryIsTrustedThroughCA(t *testing.T) {
	reg := ociregistry.NewTLS(t)
	reg.Push(t, "app", "v1", manifests)
	cache := newCache(t)

	src := ocisource.Remote{URL: reg.URL("app"), CA: reg.CA()}
	rev, err := cache.Resolve(t.Context(), src, ocisource.Ref{Tag: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	dir, release, err := cache.Pull(t.Context(), src, rev)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	readFile(t, dir, "deploy/app.yaml")

	_, err = cache.Resolve(t.Context(), ocisource.Remote{URL: reg.URL("app")}, ocisource.Ref{Tag: "v1"})
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA: want a certificate error, got %v", err)
	}
	_, err = cache.Resolve(t.Context(), ocisource.Remote{URL: reg.URL("app"), CA: []byte("not PEM")}, ocisource.Ref{Tag: "v1"})
	requireInvalid(t, err, "CA")
}

func requireInvalid(t *testing.T, err error, wantIn string) {
	t.Helper()
	var invalid *ocisource.InvalidError
	if !errors.As(err, &invalid) {
		t.Fatalf("want *InvalidError, got %T: %v", err, err)
	}
	if !strings.Contains(err.Error(), wantIn) {
		t.Errorf("error %q does not say %q", err, wantIn)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error shows the password: %v", err)
	}
}

func requirePlainHTTP(t *testing.T, err error) {
	t.Helper()
	requireInvalid(t, err, "plain http")
	var invalid *ocisource.InvalidError
	if !errors.As(err, &invalid) || !invalid.PlainHTTP {
		t.Errorf("%v does not say the registry speaks plain http (PlainHTTP)", err)
	}
}
