package gitpush

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"
	"time"
)

func TestRepositoryKeyNamesOneRepositoryWhateverTheProtocol(t *testing.T) {
	want := "github.com/org/repo"
	for _, u := range []string{
		"https://github.com/org/repo", "https://github.com/org/repo.git", "https://GitHub.com/org/repo/",
		"git@github.com:org/repo.git", "ssh://git@github.com/org/repo", "ssh://git@github.com:22/org/repo.git",
		"git://github.com/org/repo.git", "https://user@github.com/org/repo",
	} {
		if got := RepositoryKey(u); got != want {
			t.Errorf("RepositoryKey(%q) = %q, want %q", u, got, want)
		}
	}
	if got := RepositoryKey("https://github.com/org/other"); got == want {
		t.Errorf("another repository has the same key %q", got)
	}
	if got := RepositoryKey("not a url"); got != "" {
		t.Errorf("RepositoryKey(not a url) = %q, want empty", got)
	}
}

func TestConcernsOnlyTheBranchASyncFollows(t *testing.T) {
	p := Push{URLs: []string{"https://github.com/org/repo.git", "git@github.com:org/repo.git"}, Repository: "github.com/org/repo", Ref: "refs/heads/main"}
	cases := []struct {
		url, branch string
		want        bool
	}{
		{"https://github.com/org/repo", "main", true},
		{"ssh://git@github.com/org/repo.git", "", true},
		{"https://github.com/org/repo", "release", false},
		{"https://github.com/org/other", "main", false},
	}
	for _, c := range cases {
		if got := p.Concerns(c.url, c.branch); got != c.want {
			t.Errorf("Concerns(%q, %q) = %v, want %v", c.url, c.branch, got, c.want)
		}
	}
	tag := Push{URLs: []string{"https://github.com/org/repo"}, Repository: "github.com/org/repo", Ref: "refs/tags/v1.2.0"}
	if !tag.Concerns("https://github.com/org/repo", "main") {
		t.Error("a tag push must concern every sync of the repository: a tag or semver sync reads it")
	}
}

func TestVerifyGitHub(t *testing.T) {
	key, body := []byte("k"), []byte(`{"ref":"refs/heads/main"}`)
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	h := http.Header{}
	h.Set(HeaderGitHubSignature, "sha256="+hex.EncodeToString(mac.Sum(nil)))
	if err := VerifyGitHub(key, h, body); err != nil {
		t.Fatalf("valid signature refused: %v", err)
	}
	if err := VerifyGitHub([]byte("other"), h, body); err == nil {
		t.Fatal("signature under another key accepted")
	}
	if err := VerifyGitHub(key, h, append(body, ' ')); err == nil {
		t.Fatal("signature of another body accepted")
	}
	if err := VerifyGitHub(key, http.Header{}, body); err == nil {
		t.Fatal("unsigned delivery accepted")
	}
}

func TestParseGitHubAndOwn(t *testing.T) {
	p, err := ParseGitHub([]byte(`{"ref":"refs/heads/main","repository":{"clone_url":"https://h/o/r.git","ssh_url":"git@h:o/r.git","pushed_at":1764900000}}`))
	if err != nil || len(p.URLs) != 2 || p.Ref != "refs/heads/main" || p.Repository != "h/o/r" || p.PushedAt.Unix() != 1764900000 {
		t.Fatalf("ParseGitHub = %+v, %v", p, err)
	}
	// Other events spell the time in RFC 3339.
	p, err = ParseGitHub([]byte(`{"repository":{"clone_url":"https://h/o/r.git","pushed_at":"2026-12-05T01:00:00Z"}}`))
	if err != nil || !p.PushedAt.Equal(time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)) {
		t.Fatalf("ParseGitHub of a ping = %+v, %v", p, err)
	}
	if _, err := ParseGitHub([]byte(`{"ref":"refs/heads/main"}`)); err == nil {
		t.Fatal("a push naming no repository accepted")
	}
	// Signed with the key of the repository its clone URL names, it speaks for no other.
	p, err = ParseGitHub([]byte(`{"repository":{"clone_url":"https://h/o/r.git","ssh_url":"git@h:o/other.git"}}`))
	if err != nil || p.Repository != "h/o/r" || len(p.URLs) != 1 || p.Concerns("ssh://git@h/o/other", "") {
		t.Fatalf("ParseGitHub of an event naming two repositories = %+v, %v; want h/o/r alone", p, err)
	}
	p, err = ParseOwn([]byte(`{"url":"https://h/o/r"}`))
	if err != nil || p.URLs[0] != "https://h/o/r" || p.Ref != "" || p.Repository != "h/o/r" {
		t.Fatalf("ParseOwn = %+v, %v", p, err)
	}
	for _, body := range []string{`{}`, `{"url":"not a url"}`} {
		if _, err := ParseOwn([]byte(body)); err == nil {
			t.Fatalf("%s accepted", body)
		}
	}
}

func TestKeyIsDerivedPerRepository(t *testing.T) {
	shared := []byte("shared")
	mac := hmac.New(sha256.New, shared)
	mac.Write([]byte("git-push=github.com/org/repo"))
	if got, want := string(Key(shared, "github.com/org/repo")), hex.EncodeToString(mac.Sum(nil)); got != want {
		t.Errorf("Key = %s, want %s (printf %%s git-push=github.com/org/repo | openssl dgst -sha256 -hmac KEY)", got, want)
	}
	if string(Key(shared, "github.com/org/repo")) == string(shared) || string(Key([]byte("other"), "github.com/org/repo")) == string(Key(shared, "github.com/org/repo")) {
		t.Error("the derived key does not depend on the shared key alone")
	}
	if string(Key(shared, "github.com/org/repo")) == string(Key(shared, "github.com/org/other")) {
		t.Error("two repositories share a key")
	}
}
