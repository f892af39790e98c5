package gitpush

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"
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
	p := Push{URLs: []string{"https://github.com/org/repo.git", "git@github.com:org/repo.git"}, Ref: "refs/heads/main"}
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
	tag := Push{URLs: []string{"https://github.com/org/repo"}, Ref: "refs/tags/v1.2.0"}
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
	p, err := ParseGitHub([]byte(`{"ref":"refs/heads/main","repository":{"clone_url":"https://h/o/r.git","ssh_url":"git@h:o/r.git"}}`))
	if err != nil || len(p.URLs) != 2 || p.Ref != "refs/heads/main" {
		t.Fatalf("ParseGitHub = %+v, %v", p, err)
	}
	if _, err := ParseGitHub([]byte(`{"ref":"refs/heads/main"}`)); err == nil {
		t.Fatal("a push naming no repository accepted")
	}
	p, err = ParseOwn([]byte(`{"url":"https://h/o/r"}`))
	if err != nil || p.URLs[0] != "https://h/o/r" || p.Ref != "" {
		t.Fatalf("ParseOwn = %+v, %v", p, err)
	}
	if _, err := ParseOwn([]byte(`{}`)); err == nil {
		t.Fatal("a notification naming no URL accepted")
	}
}

func TestKeyIsDerivedAndNotTheSharedKey(t *testing.T) {
	shared := []byte("shared")
	mac := hmac.New(sha256.New, shared)
	mac.Write([]byte("git-push"))
	if got, want := string(Key(shared)), hex.EncodeToString(mac.Sum(nil)); got != want {
		t.Errorf("Key = %s, want %s (printf %%s git-push | openssl dgst -sha256 -hmac KEY)", got, want)
	}
	if string(Key(shared)) == string(shared) || string(Key([]byte("other"))) == string(Key(shared)) {
		t.Error("the derived key does not depend on the shared key alone")
	}
}
