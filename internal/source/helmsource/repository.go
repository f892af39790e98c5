package helmsource

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// repository is a Source's RepoURL checked and normalized.
type repository struct {
	oci bool
	// url is the repository's address without a trailing slash; for OCI, oci://host/path.
	url string
	// origin is scheme://host:port, the only place credentials are sent (HTTP only).
	origin string
}

// parseSource checks src's RepoURL and chart name. Its errors never repeat a URL that
// holds credentials.
func parseSource(src Source) (repository, error) {
	if src.Chart == "" || strings.ContainsAny(src.Chart, "/\\?#@: ") || src.Chart == "." || src.Chart == ".." {
		return repository{}, &InvalidError{Msg: fmt.Sprintf("chart name %q is not a chart name", src.Chart)}
	}
	u, err := url.Parse(strings.TrimSpace(src.RepoURL))
	if err != nil {
		return repository{}, &InvalidError{Msg: "repository URL is not a valid URL"}
	}
	if u.User != nil {
		return repository{}, &InvalidError{Msg: "repository URL must not hold credentials: set them in the Secret instead"}
	}
	if u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return repository{}, &InvalidError{Msg: fmt.Sprintf("repository URL %s is not of the form https://host[:port]/path or oci://host[:port]/path", u.Redacted())}
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	switch u.Scheme {
	case "oci":
		if u.Path == "" {
			return repository{}, &InvalidError{Msg: fmt.Sprintf("repository URL %s names no repository path", u.String())}
		}
		return repository{oci: true, url: u.String()}, nil
	case "http":
		if !src.InsecureHTTP {
			return repository{}, &InvalidError{Msg: fmt.Sprintf("repository URL %s is plain http, which would carry credentials and charts in clear; set spec.source.insecureAllowHTTP to allow it", u.String())}
		}
	case "https":
	default:
		return repository{}, &InvalidError{Msg: fmt.Sprintf("repository URL scheme %q is not supported: use https://, http:// or oci://", u.Scheme)}
	}
	return repository{url: u.String(), origin: origin(u)}, nil
}

// origin is scheme://host:port, the port made explicit so that https://h and
// https://h:443 are one origin.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// archiveURL resolves an index's URL for an archive against the repository, and checks
// it may be fetched.
func archiveURL(repo repository, raw string, insecure bool) (string, error) {
	base, err := url.Parse(repo.url + "/")
	if err != nil {
		return "", &InvalidError{Msg: "repository URL is not a valid URL"}
	}
	ref, err := url.Parse(raw)
	if err != nil {
		return "", &InvalidError{Msg: fmt.Sprintf("the index of %s lists an archive URL that does not parse", repo.url)}
	}
	u := base.ResolveReference(ref)
	if u.User != nil {
		return "", &InvalidError{Msg: fmt.Sprintf("the index of %s lists an archive URL holding credentials, which are not used", repo.url)}
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && insecure:
	case u.Scheme == "http":
		return "", &InvalidError{Msg: fmt.Sprintf("archive %s is plain http; set spec.source.insecureAllowHTTP to allow it", display(u))}
	default:
		return "", &InvalidError{Msg: fmt.Sprintf("the index of %s lists an archive URL of scheme %q; only https and http are fetched", repo.url, u.Scheme)}
	}
	return u.String(), nil
}

// display is u without credentials, query or fragment, fit for messages.
func display(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery = ""
	c.Fragment = ""
	return c.String()
}

// displayURL is raw as display shows it.
func displayURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unparsable URL)"
	}
	return display(u)
}

// credKey tells apart the ways src may reach its repository (credentials, trusted CA,
// plain http), so that two syncs with different Secrets never share what one fetched.
func (c *Client) credKey(src Source) string {
	mac := hmac.New(sha256.New, c.salt[:])
	for _, part := range [][]byte{[]byte(src.Username), []byte(src.Password), src.CA} {
		_, _ = fmt.Fprintf(mac, "%d:", len(part))
		_, _ = mac.Write(part)
	}
	if src.InsecureHTTP {
		_, _ = mac.Write([]byte("insecure"))
	}
	return hex.EncodeToString(mac.Sum(nil)[:16])
}
