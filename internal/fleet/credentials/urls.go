// Package credentials decides whether a sync may use a Secret of the operator's namespace
// for a source: the Secret says which URLs it may be sent to (an admin's annotation, as
// Argo CD matches repository credentials to a URL prefix), and whoever last changed the
// sync must hold the RBAC verb use on it. Every source kind reads its Secrets through a
// Gate, so no sync can send another team's credentials to a server of its own choosing.
package credentials

import (
	"fmt"
	"net/url"
	"strings"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// AllowedURLs reads the URL prefixes a Secret's annotation lists.
func AllowedURLs(annotations map[string]string) []string {
	return strings.FieldsFunc(annotations[vidrav1alpha1.AllowedURLsAnnotation], func(r rune) bool {
		return r == ',' || r == ' ' || r == '\n' || r == '\t'
	})
}

// Covers says whether the source URL lies under one of the prefixes. A prefix covers a
// URL of the same scheme and host (port included) whose path starts with the prefix's at
// a segment boundary: https://git.example.com/team-a covers
// https://git.example.com/team-a/app.git, never https://git.example.com/team-ab or
// https://git.example.com.evil.org/team-a.
func Covers(prefixes []string, source string) bool {
	src, err := parse(source)
	if err != nil {
		return false
	}
	for _, p := range prefixes {
		prefix, err := parse(p)
		if err != nil {
			continue
		}
		if prefix.Scheme == src.Scheme && strings.EqualFold(prefix.Host, src.Host) && underPath(prefix.Path, src.Path) {
			return true
		}
	}
	return false
}

// parse reads an absolute URL with a host and no password, its path cleaned of a trailing
// slash.
func parse(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	switch {
	case err != nil:
		return nil, err
	case u.Scheme == "" || u.Host == "":
		return nil, fmt.Errorf("%q is not an absolute URL", raw)
	}
	if _, hasPassword := u.User.Password(); hasPassword {
		return nil, fmt.Errorf("%q carries a password", raw)
	}
	// A user name (ssh://git@host/...) is a login, not a credential: it decides nothing.
	u.User = nil
	u.Scheme = strings.ToLower(u.Scheme)
	u.Path = strings.TrimSuffix(u.EscapedPath(), "/")
	return u, nil
}

// underPath says whether path is prefix or below it; neither holds ".." segments that
// could climb out of the prefix.
func underPath(prefix, path string) bool {
	if hasDotDot(prefix) || hasDotDot(path) {
		return false
	}
	return prefix == "" || path == prefix || strings.HasPrefix(path, prefix+"/")
}

// hasDotDot reads each segment unescaped, so neither %2e%2e nor an escaped slash hides
// a climb.
func hasDotDot(path string) bool {
	for _, seg := range strings.Split(path, "/") {
		unescaped, err := url.PathUnescape(seg)
		if err != nil {
			return true
		}
		for _, part := range strings.Split(unescaped, "/") {
			if part == ".." {
				return true
			}
		}
	}
	return false
}
