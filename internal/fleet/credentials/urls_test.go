package credentials

import "testing"

func TestCovers(t *testing.T) {
	prefixes := []string{"https://git.example.com/team-a", "https://infrahub.example.com:8443/", "ssh://git@ssh.example.com/team-a"}
	for url, want := range map[string]bool{
		"https://git.example.com/team-a":                 true,
		"https://git.example.com/team-a/":                true,
		"https://git.example.com/team-a/app.git":         true,
		"https://GIT.example.com/team-a/app.git":         true,
		"HTTPS://git.example.com/team-a/app.git":         true,
		"https://git.example.com/team-ab":                false,
		"https://git.example.com/team-b/app.git":         false,
		"https://git.example.com":                        false,
		"http://git.example.com/team-a/app.git":          false,
		"ssh://git.example.com/team-a/app.git":           false,
		"https://git.example.com.evil.org/team-a":        false,
		"https://git.example.com:444/team-a":             false,
		"https://evil.org/git.example.com/team-a":        false,
		"https://user@git.example.com/team-a":            true,
		"https://git.example.com/team-a/../team-b":       false,
		"https://git.example.com/team-a/%2e%2e/team-b":   false,
		"https://git.example.com/team-a/x%2F..%2F..%2Fb": false,
		"https://infrahub.example.com:8443":              true,
		"https://infrahub.example.com:8443/graphql":      true,
		"https://infrahub.example.com/graphql":           false,
		"https://user:pw@git.example.com/team-a":         false,
		"ssh://git@git.example.com/team-a/app.git":       false,
		"ssh://git@ssh.example.com/team-a/app.git":       true,
		"ssh://ssh.example.com/team-a/app.git":           true,
		"not a url":                                      false,
		"":                                               false,
	} {
		if got := Covers(prefixes, url); got != want {
			t.Errorf("Covers(%q) = %v, want %v", url, got, want)
		}
	}
	if Covers(nil, "https://git.example.com/team-a") {
		t.Error("no prefix covers a URL")
	}
}

func TestAllowedURLs(t *testing.T) {
	got := AllowedURLs(map[string]string{"vidra.infrahub.operators.com/allowed-urls": " https://a.example.com/x,https://b.example.com\nhttps://c.example.com "})
	want := []string{"https://a.example.com/x", "https://b.example.com", "https://c.example.com"}
	if len(got) != len(want) {
		t.Fatalf("AllowedURLs = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("AllowedURLs = %q, want %q", got, want)
		}
	}
}
