package gitsource

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	fluxgit "github.com/fluxcd/pkg/git"
	"github.com/fluxcd/pkg/ssh/knownhosts"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/go-git/go-git/v5/storage/memory"
)

// endpoint is a Remote that passed validation.
type endpoint struct {
	remote Remote
	parsed url.URL
	// display is the URL for messages: never any userinfo but an ssh user.
	display string
}

// parseRemote validates r. Its errors never quote the URL as given, since
// that may carry credentials.
func parseRemote(r Remote) (*endpoint, error) {
	// A query or fragment is no part of a repository's name, and would reach the server
	// or Git's transport untold; a backslash reads as a path by some parsers and as the
	// end of the host by others (https://allowed.example\@other.example/).
	if strings.ContainsAny(r.URL, "?#\\") {
		return nil, &InvalidError{Reason: "git URL has a query (?), a fragment (#) or a backslash; name the repository by scheme, host and path alone"}
	}
	u, err := url.Parse(r.URL)
	if err != nil || u.Host == "" {
		if !strings.Contains(r.URL, "://") && strings.Contains(r.URL, "@") {
			return nil, &InvalidError{Reason: "git URL in scp form (user@host:path) is not supported; write ssh://user@host/path"}
		}
		return nil, &InvalidError{Reason: "git URL does not parse as scheme://host/path"}
	}
	e := &endpoint{remote: r, parsed: *u}
	shown := *u
	shown.User = nil
	if u.Scheme == "ssh" && u.User != nil {
		shown.User = url.User(u.User.Username())
	}
	e.display = shown.String()

	if _, hasPassword := u.User.Password(); hasPassword || (u.User != nil && u.Scheme != "ssh") {
		return nil, &InvalidError{Reason: fmt.Sprintf("git URL %s carries credentials; put them in the Secret instead", e.display)}
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !r.InsecureHTTP {
			return nil, &InvalidError{Reason: fmt.Sprintf("git URL %s is plain http://, which would carry credentials and content in clear; use https://", e.display), PlainHTTP: true}
		}
	case "ssh":
		if len(r.Auth.Identity) == 0 || len(r.Auth.KnownHosts) == 0 {
			return nil, &InvalidError{Reason: fmt.Sprintf("git URL %s is ssh://: the Secret needs identity and known_hosts", e.display)}
		}
	default:
		return nil, &InvalidError{Reason: fmt.Sprintf("git URL %s has unsupported scheme %q; use https:// or ssh://", e.display, u.Scheme)}
	}
	if u.Scheme != "ssh" {
		a := r.Auth
		if a.BearerToken != "" && (a.Username != "" || a.Password != "") {
			return nil, &InvalidError{Reason: "the Secret sets both a bearer token and a username/password; keep one"}
		}
		if a.Password != "" && a.Username == "" {
			return nil, &InvalidError{Reason: "the Secret sets a password without a username"}
		}
	}
	return e, nil
}

// transportAuth builds go-git's auth for listing refs. Flux's equivalent
// is unexported, so this mirrors it.
func (e *endpoint) transportAuth() (transport.AuthMethod, error) {
	a := e.remote.Auth
	if e.parsed.Scheme != "ssh" {
		switch {
		case a.Username != "":
			return &http.BasicAuth{Username: a.Username, Password: a.Password}, nil
		case a.BearerToken != "":
			return &http.TokenAuth{Token: a.BearerToken}, nil
		}
		return nil, nil
	}
	user := e.parsed.User.Username()
	if user == "" {
		user = fluxgit.DefaultPublicKeyAuthUser
	}
	keys, err := ssh.NewPublicKeys(user, a.Identity, a.Password)
	if err != nil {
		// The parse error names no key material.
		return nil, &InvalidError{Reason: fmt.Sprintf("the Secret's identity is not a usable private key: %v", err)}
	}
	callback, algorithms, err := knownhosts.New(a.KnownHosts)
	if err != nil {
		return nil, &InvalidError{Reason: fmt.Sprintf("the Secret's known_hosts does not parse: %v", err)}
	}
	keys.HostKeyCallback = callback
	keys.HostKeyAlgorithms = algorithms
	return keys, nil
}

// fluxAuth builds the options Flux's gogit client takes for cloning.
func (e *endpoint) fluxAuth() (*fluxgit.AuthOptions, error) {
	a := e.remote.Auth
	data := map[string][]byte{}
	// NewAuthOptions looks at which keys are present, so set only those
	// with a value. The CA is not among them: go-git would then need its
	// own transport, and the exchange's carries it (see boundedTransport).
	for key, value := range map[string][]byte{
		"username":    []byte(a.Username),
		"password":    []byte(a.Password),
		"bearerToken": []byte(a.BearerToken),
		"identity":    a.Identity,
		"known_hosts": a.KnownHosts,
	} {
		if len(value) > 0 {
			data[key] = value
		}
	}
	opts, err := fluxgit.NewAuthOptions(e.parsed, data)
	if err != nil {
		// Flux's validation messages name options, never their values.
		return nil, &InvalidError{Reason: fmt.Sprintf("git credentials for %s: %v", e.display, err)}
	}
	return opts, nil
}

// refs is a remote's ref advertisement.
type refs struct {
	// hashes maps full ref names to hashes; annotated tags also appear
	// peeled, as "refs/tags/v1^{}" → commit.
	hashes map[string]string
	// head is the branch HEAD points at ("refs/heads/main"), if advertised.
	head string
}

// named returns the commit a full ref name points at, peeling an annotated tag.
func (r refs) named(name string) (string, bool) {
	if h, ok := r.hashes[name+"^{}"]; ok {
		return h, true
	}
	h, ok := r.hashes[name]
	return h, ok
}

// tag returns the commit a tag points at, peeling annotated tags.
func (r refs) tag(name string) (string, bool) {
	full := plumbing.NewTagReferenceName(name).String()
	if h, ok := r.hashes[full+"^{}"]; ok {
		return h, true
	}
	h, ok := r.hashes[full]
	return h, ok
}

// listRefs asks the remote for its refs, as git ls-remote does: one ref
// advertisement of at most maxBytes, no objects.
func (e *endpoint) listRefs(ctx context.Context, maxBytes int64) (refs, error) {
	auth, err := e.transportAuth()
	if err != nil {
		return refs{}, err
	}
	x, err := newExchange(e.remote.CA, maxBytes, 0)
	if err != nil {
		return refs{}, err
	}
	defer x.close()
	remote := gogit.NewRemote(memory.NewStorage(), &config.RemoteConfig{
		Name: fluxgit.DefaultRemote,
		URLs: []string{e.remote.URL},
	})
	list, err := remote.ListContext(x.within(ctx), &gogit.ListOptions{
		Auth:          auth,
		PeelingOption: gogit.AppendPeeled,
	})
	if x.over() != nil {
		return refs{}, &LimitError{URL: e.display, Bound: "response", Limit: maxBytes}
	}
	if err != nil {
		return refs{}, classify(err, e.display, "list refs of")
	}
	out := refs{hashes: make(map[string]string, len(list))}
	for _, ref := range list {
		switch {
		case ref.Name() == plumbing.HEAD && ref.Type() == plumbing.SymbolicReference:
			out.head = ref.Target().String()
		case ref.Type() == plumbing.HashReference:
			out.hashes[ref.Name().String()] = ref.Hash().String()
		}
	}
	return out, nil
}
