package gitsource

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestWrongCredentialsAreAuthErrorsWithoutTheSecret(t *testing.T) {
	f := newFixture(t)
	f.server.RequireBasicAuth("alice", "correct-horse")
	c := newCache(t, Limits{})
	ctx := context.Background()
	commit := Revision{Ref: "main", Commit: f.second}

	for _, auth := range []Auth{
		{},
		{Username: "alice", Password: "wrong-battery-staple"},
		{BearerToken: "tok-not-known-here"},
	} {
		remote := f.remote
		remote.Auth = auth
		_, err := c.Resolve(ctx, remote, Ref{})
		if !IsAuthError(err) {
			t.Fatalf("Resolve with %q/%q = %v, want an auth error", auth.Username, auth.BearerToken, err)
		}
		// A commit ref is checked against the remote too: it opens nothing by itself.
		if _, err := c.Resolve(ctx, remote, Ref{Commit: f.second}); !IsAuthError(err) {
			t.Fatalf("Resolve of a commit with %q/%q = %v, want an auth error", auth.Username, auth.BearerToken, err)
		}
		_, _, cerr := c.Checkout(ctx, remote, commit)
		if !IsAuthError(cerr) {
			t.Fatalf("Checkout with %q = %v, want an auth error", auth.Username, cerr)
		}
		for _, e := range []error{err, cerr} {
			for _, secret := range []string{"wrong-battery-staple", "correct-horse", "tok-not-known-here"} {
				if strings.Contains(e.Error(), secret) {
					t.Errorf("error %q shows a credential", e)
				}
			}
		}
	}

	remote := f.remote
	remote.Auth = Auth{Username: "alice", Password: "correct-horse"}
	rev, err := c.Resolve(ctx, remote, Ref{})
	if err != nil {
		t.Fatalf("Resolve with the right password: %v", err)
	}
	_, release, err := c.Checkout(ctx, remote, rev)
	if err != nil {
		t.Fatalf("Checkout with the right password: %v", err)
	}
	release()
}

func TestBearerToken(t *testing.T) {
	f := newFixture(t)
	f.server.RequireBearer("tok-123")
	c := newCache(t, Limits{})
	remote := f.remote
	remote.Auth = Auth{BearerToken: "tok-123"}
	rev, err := c.Resolve(context.Background(), remote, Ref{Tag: "v1.0.0"})
	if err != nil {
		t.Fatalf("Resolve with the token: %v", err)
	}
	_, release, err := c.Checkout(context.Background(), remote, rev)
	if err != nil {
		t.Fatalf("Checkout with the token: %v", err)
	}
	release()
}

func TestCheckoutIsNotSharedAcrossCredentials(t *testing.T) {
	f := newFixture(t)
	f.server.RequireBasicAuth("alice", "correct-horse")
	c := newCache(t, Limits{})
	good := f.remote
	good.Auth = Auth{Username: "alice", Password: "correct-horse"}
	rev := Revision{Ref: "main", Commit: f.second}
	_, release, err := c.Checkout(context.Background(), good, rev)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if _, _, err := c.Checkout(context.Background(), f.remote, rev); !IsAuthError(err) {
		t.Fatalf("Checkout without credentials of a cached private commit = %v, want an auth error", err)
	}
}

func TestUnusableInputIsInvalid(t *testing.T) {
	c := newCache(t, Limits{})
	ctx := context.Background()
	key := testIdentity(t)
	hosts := []byte("git.example.com " + string(ssh.MarshalAuthorizedKey(mustSigner(t, key).PublicKey())))
	cases := []struct {
		name   string
		remote Remote
		ref    Ref
		want   string
	}{
		{"plain http", Remote{URL: "http://127.0.0.1:1/app.git"}, Ref{}, "plain http://"},
		{"unsupported scheme", Remote{URL: "ftp://example.com/app.git"}, Ref{}, `unsupported scheme "ftp"`},
		{"scp form", Remote{URL: "git@github.com:org/repo.git"}, Ref{}, "scp form"},
		{"no URL", Remote{URL: "not a url"}, Ref{}, "does not parse"},
		{"password in URL", Remote{URL: "https://bob:hunter2@example.com/app.git"}, Ref{}, "carries credentials"},
		{"token as URL user", Remote{URL: "https://ghp_tokentoken@example.com/app.git"}, Ref{}, "carries credentials"},
		{"query", Remote{URL: "https://example.com/app.git?token=hunter2"}, Ref{}, "a query (?), a fragment (#) or a backslash"},
		{"fragment", Remote{URL: "https://example.com/app.git#main"}, Ref{}, "a query (?), a fragment (#) or a backslash"},
		{"backslash before the host's end", Remote{URL: "https://allowed.example\\@other.example/app.git"}, Ref{}, "a query (?), a fragment (#) or a backslash"},
		{"ssh without known_hosts", Remote{URL: "ssh://git@example.com/app.git", Auth: Auth{Identity: key}}, Ref{}, "identity and known_hosts"},
		{"ssh with a bad key", Remote{URL: "ssh://git@git.example.com/app.git", Auth: Auth{Identity: []byte("nope"), KnownHosts: hosts}}, Ref{}, "not a usable private key"},
		{"token and password", Remote{URL: "https://example.com/app.git", Auth: Auth{Username: "a", Password: "b", BearerToken: "c"}}, Ref{}, "both a bearer token"},
		{"two refs", Remote{URL: "https://example.com/app.git"}, Ref{Branch: "main", Tag: "v1"}, "at most one"},
		{"bad branch", Remote{URL: "https://example.com/app.git"}, Ref{Branch: "a..b"}, "not a valid Git branch name"},
		{"short commit", Remote{URL: "https://example.com/app.git"}, Ref{Commit: "abc123"}, "not a full 40-hex"},
		{"bad semver", Remote{URL: "https://example.com/app.git"}, Ref{SemVer: ">>1.x!"}, "does not parse"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Resolve(ctx, tc.remote, tc.ref)
			if !IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Resolve = %v, want an *InvalidError saying %q", err, tc.want)
			}
			for _, secret := range []string{"hunter2", "ghp_tokentoken"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q shows a credential", err)
				}
			}
		})
	}
	if _, _, err := c.Checkout(ctx, Remote{URL: "http://127.0.0.1:1/app.git"}, Revision{Commit: strings.Repeat("a", 40)}); !IsInvalid(err) {
		t.Errorf("Checkout over plain http = %v, want invalid", err)
	}
}

func TestSSHAuthIsBuiltFromIdentityAndKnownHosts(t *testing.T) {
	key := testIdentity(t)
	hosts := []byte("git.example.com " + string(ssh.MarshalAuthorizedKey(mustSigner(t, key).PublicKey())))
	e, err := parseRemote(Remote{URL: "ssh://deploy@git.example.com/app.git", Auth: Auth{Identity: key, KnownHosts: hosts}})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := e.transportAuth()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(auth.String(), "user: deploy") {
		t.Errorf("ssh auth %q does not use the URL's user", auth)
	}
	if _, err := e.fluxAuth(); err != nil {
		t.Errorf("flux auth options: %v", err)
	}
}

func TestScrubHidesCredentialsLibrariesEcho(t *testing.T) {
	inner := &RefNotFoundError{URL: "https://example.com/app.git", Kind: "branch", Name: "s3cr3t-pass"}
	err := scrub(inner, Auth{Username: "u", Password: "s3cr3t-pass"})
	if strings.Contains(err.Error(), "s3cr3t-pass") || !IsNotFound(err) {
		t.Fatalf("scrub = %q (not found: %v), want the password hidden and the kind kept", err, IsNotFound(err))
	}
	if got := scrub(inner, Auth{Password: "other-pass"}); got.Error() != inner.Error() {
		t.Error("scrub changed an error that shows no credential")
	}
}

func testIdentity(t *testing.T) []byte {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block)
}

func mustSigner(t *testing.T, pemBytes []byte) ssh.Signer {
	t.Helper()
	s, err := ssh.ParsePrivateKey(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
