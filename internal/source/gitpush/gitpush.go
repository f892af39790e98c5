// Package gitpush reads the notifications a Git host sends when a repository changes:
// GitHub's push event, signed with X-Hub-Signature-256, and Vidra's own form, signed as
// Infrahub signs its webhooks, that names a repository URL and, optionally, a ref. Each
// repository signs with a key of its own, and its pushes are paced (Pacer).
package gitpush

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Headers of GitHub's webhooks.
const (
	HeaderGitHubEvent     = "X-GitHub-Event"
	HeaderGitHubDelivery  = "X-GitHub-Delivery"
	HeaderGitHubSignature = "X-Hub-Signature-256"
)

// Push is one change of a repository.
type Push struct {
	// URLs are the repository's URLs, as the host spells them (clone, SSH, web).
	URLs []string
	// Repository is what every one of URLs names (RepositoryKey).
	Repository string
	// Ref is the ref that changed ("refs/heads/main"); empty: any.
	Ref string
	// PushedAt is when the host says the push happened (GitHub's repository.pushed_at);
	// zero when it does not say.
	PushedAt time.Time
}

// Key is the key the push notifications of one repository (a RepositoryKey) are signed
// with, derived from the receiver's shared key: the hex HMAC-SHA256 of "git-push=" and
// the repository, keyed by it. A Git host holds only the key of its repository, so whoever
// administers a repository can sign neither Infrahub's deliveries nor another
// repository's pushes. The repository is read from the body, which the signature covers.
func Key(shared []byte, repository string) []byte {
	mac := hmac.New(sha256.New, shared)
	mac.Write([]byte("git-push="))
	mac.Write([]byte(repository))
	return []byte(hex.EncodeToString(mac.Sum(nil)))
}

// IsGitHub reports whether a delivery is GitHub's.
func IsGitHub(header http.Header) bool {
	return header.Get(HeaderGitHubEvent) != ""
}

// CheckGitHubHeaders checks what can be checked of GitHub's delivery before its body is
// read: a signature header of the right form.
func CheckGitHubHeaders(header http.Header) error {
	_, err := gitHubSignature(header)
	return err
}

func gitHubSignature(header http.Header) ([]byte, error) {
	sig, ok := strings.CutPrefix(header.Get(HeaderGitHubSignature), "sha256=")
	if !ok {
		return nil, errors.New("no " + HeaderGitHubSignature + " header of the form sha256=<hex>")
	}
	got, err := hex.DecodeString(sig)
	if err != nil || len(got) != sha256.Size {
		return nil, fmt.Errorf("%s is not a hex SHA-256", HeaderGitHubSignature)
	}
	return got, nil
}

// VerifyGitHub checks GitHub's signature of body: HMAC-SHA256 under key, hex, after
// "sha256=".
func VerifyGitHub(key []byte, header http.Header, body []byte) error {
	got, err := gitHubSignature(header)
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return errors.New("signature does not match")
	}
	return nil
}

// ParseGitHub reads a GitHub event's repository, and a push event's ref and time. It is
// read before its signature is checked, since the repository says which key signs it.
func ParseGitHub(body []byte) (Push, error) {
	var ev struct {
		Ref        string `json:"ref"`
		Repository struct {
			CloneURL string          `json:"clone_url"`
			SSHURL   string          `json:"ssh_url"`
			GitURL   string          `json:"git_url"`
			HTMLURL  string          `json:"html_url"`
			PushedAt json.RawMessage `json:"pushed_at"`
		} `json:"repository"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		return Push{}, fmt.Errorf("push event: %w", err)
	}
	r := ev.Repository
	// The first URL names the repository, whose key signs the event; another naming some
	// other repository (an SSH host of its own, say) is left out, so that one repository's
	// key can never speak for another's syncs.
	var repository string
	var urls []string
	for _, u := range []string{r.CloneURL, r.HTMLURL, r.GitURL, r.SSHURL} {
		key := RepositoryKey(u)
		if repository == "" {
			repository = key
		}
		if key != "" && key == repository {
			urls = append(urls, u)
		}
	}
	if repository == "" {
		return Push{}, errors.New("push event names no repository URL")
	}
	return Push{URLs: urls, Repository: repository, Ref: ev.Ref, PushedAt: timeOf(r.PushedAt)}, nil
}

// timeOf reads GitHub's pushed_at: Unix seconds in push events, RFC 3339 in others;
// zero when absent or neither.
func timeOf(raw json.RawMessage) time.Time {
	if seconds, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return time.Unix(seconds, 0)
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		if t, err := time.Parse(time.RFC3339, text); err == nil {
			return t
		}
	}
	return time.Time{}
}

// ParseOwn reads Vidra's own form: {"url": "https://git.example.com/org/repo.git",
// "ref": "refs/heads/main"} (ref optional).
func ParseOwn(body []byte) (Push, error) {
	var ev struct {
		URL string `json:"url"`
		Ref string `json:"ref"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		return Push{}, fmt.Errorf("push notification: %w", err)
	}
	if ev.URL == "" {
		return Push{}, errors.New(`push notification names no repository: want {"url": "...", "ref": "refs/heads/..."}`)
	}
	repository := RepositoryKey(ev.URL)
	if repository == "" {
		return Push{}, fmt.Errorf("push notification: %q is no repository URL", ev.URL)
	}
	return Push{URLs: []string{ev.URL}, Repository: repository, Ref: ev.Ref}, nil
}

// Concerns reports whether the push changes what a sync of repository syncURL following
// branch ("" for the remote's HEAD, a tag or a semver range) reads.
func (p Push) Concerns(syncURL, branch string) bool {
	if p.Repository == "" || RepositoryKey(syncURL) != p.Repository {
		return false
	}
	b, isBranch := strings.CutPrefix(p.Ref, "refs/heads/")
	return branch == "" || !isBranch || b == branch
}

// RepositoryKey is a repository's URL reduced to what names it whatever the protocol:
// host and path, lower-case host, without credentials, port, ".git" or trailing "/"
// (https://github.com/org/repo, git@github.com:org/repo.git and
// ssh://git@github.com/org/repo are one repository). "" when rawURL is no URL.
func RepositoryKey(rawURL string) string {
	s := strings.TrimSpace(rawURL)
	if !strings.Contains(s, "://") {
		// scp-like: user@host:path
		at := strings.LastIndex(s, "@")
		host, path, ok := strings.Cut(s[at+1:], ":")
		if !ok {
			return ""
		}
		s = "ssh://" + host + "/" + path
	}
	u, err := url.Parse(s)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	path := strings.TrimSuffix(strings.TrimRight(u.Path, "/"), ".git")
	return strings.ToLower(u.Hostname()) + "/" + strings.TrimLeft(path, "/")
}
