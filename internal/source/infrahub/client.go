// Package infrahub is a client of the parts of Infrahub's HTTP API that deliver artifacts:
// authentication (API token, or username and password with JWT refresh), listing
// artifacts by name through GraphQL or a stored query, downloading their content with its
// checksum verified, and Infrahub's signed webhooks. A sync reads within its Limits
// (artifacts, bytes, time) and a memory Budget every sync shares, so that no Infrahub can
// exhaust the memory of the process.
package infrahub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Credentials authenticate to Infrahub: an API token, or a username and password. The
// zero value reads anonymously.
type Credentials struct {
	Token    string
	Username string
	Password string
}

// String never shows a secret, so Credentials cannot leak through a log line.
func (c Credentials) String() string {
	switch {
	case c.Token != "":
		return "api token"
	case c.Username != "":
		return "user " + c.Username
	default:
		return "anonymous"
	}
}

// Options configure a Client.
type Options struct {
	// HTTPClient sends the requests; it carries the timeouts and TLS settings.
	HTTPClient *http.Client
	// Credentials authenticate every request.
	Credentials Credentials
	// OnResponse, when set, is told the outcome of every request: the HTTP status code,
	// or "error" when no answer came.
	OnResponse func(code string)
	// StallWindow and MinBytesPerWindow are the floor of an answer's pace: a body that
	// brings fewer bytes in a window is given up (ErrStalled). Zero: the package's.
	StallWindow       time.Duration
	MinBytesPerWindow int64
}

// Client talks to one Infrahub. It keeps the JWTs of a username/password login between
// calls, so it logs in once and refreshes only when Infrahub says the token expired. It is
// safe for concurrent use.
type Client struct {
	base *url.URL
	opts Options

	mu      sync.Mutex
	access  string
	refresh string
}

// New returns a client of the Infrahub at baseURL.
func New(baseURL string, opts Options) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("infrahub URL %q: want an http or https URL with a host", baseURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if opts.HTTPClient == nil {
		opts.HTTPClient = http.DefaultClient
	}
	return &Client{base: u, opts: opts}, nil
}

// APIError is an answer of Infrahub other than success.
type APIError struct {
	// Status is the HTTP status code; 200 for a GraphQL answer that carries errors.
	Status int
	// Messages are Infrahub's error messages.
	Messages []string
}

func (e *APIError) Error() string {
	msg := strings.Join(e.Messages, "; ")
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Status == http.StatusOK {
		return "GraphQL errors: " + msg
	}
	return fmt.Sprintf("HTTP %d: %s", e.Status, msg)
}

// IsAuthError reports whether err is Infrahub refusing the credentials: retrying without
// changing them does not help.
func IsAuthError(err error) bool {
	var apiErr *APIError
	return errors.As(err, &apiErr) && (apiErr.Status == http.StatusUnauthorized || apiErr.Status == http.StatusForbidden)
}

// expiredSignature is Infrahub's message for an expired access token.
const expiredSignature = "Expired Signature"

// maxResponseBytes caps every answer but a download, so a misbehaving server cannot
// exhaust memory.
const maxResponseBytes = 16 << 20

// maxErrorBytes is how much of an error answer is read: enough for any error envelope,
// and no memory held for a server that sends megabytes with its 404.
const maxErrorBytes = 64 << 10

// request is one HTTP call, built anew for a retry.
type request struct {
	method string
	path   string // escaped
	query  url.Values
	body   []byte
	// auth says how the request authenticates: with the client's credentials (the
	// default), with no credentials (to log in), or with the refresh token.
	auth   authMode
	bearer string
	// bounded, when set, reads a successful answer within a sync's quota instead of
	// the limit do is given.
	bounded *boundedRead
}

type authMode int

const (
	authCredentials authMode = iota
	authNone
	authBearer
)

// do sends req with the credentials and returns the answer when its status is 200. With
// a username and password it logs in when no token is held yet, and on "Expired
// Signature" refreshes the token (or logs in again) and retries once.
func (c *Client) do(ctx context.Context, req request, limit int64) ([]byte, error) {
	body, err := c.send(ctx, req, limit)
	var apiErr *APIError
	if c.opts.Credentials.Token == "" && c.opts.Credentials.Username != "" &&
		errors.As(err, &apiErr) && apiErr.Status == http.StatusUnauthorized && containsMessage(apiErr.Messages, expiredSignature) {
		if err := c.renew(ctx); err != nil {
			return nil, err
		}
		body, err = c.send(ctx, req, limit)
	}
	return body, err
}

func (c *Client) send(ctx context.Context, req request, limit int64) ([]byte, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	u := *c.base
	u.RawPath = u.Path + req.path
	u.Path, _ = url.PathUnescape(u.RawPath)
	u.RawQuery = req.query.Encode()
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u.String(), body)
	if err != nil {
		return nil, err
	}
	if req.body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("Accept", "application/json")
	switch req.auth {
	case authCredentials:
		if err := c.authenticate(ctx, hr); err != nil {
			return nil, err
		}
	case authBearer:
		hr.Header.Set("Authorization", "Bearer "+req.bearer)
	}
	resp, err := c.opts.HTTPClient.Do(hr)
	if err != nil {
		c.observe("error")
		return nil, fmt.Errorf("%s %s: %w", req.method, req.pathForHumans(), scrubURL(err))
	}
	defer func() { _ = resp.Body.Close() }()
	c.observe(strconv.Itoa(resp.StatusCode))
	body, stop := c.watchProgress(cancel, resp.Body)
	defer stop()
	if resp.StatusCode != http.StatusOK {
		// Only the start of an error answer is read: its envelope is short.
		data, _ := io.ReadAll(io.LimitReader(body, maxErrorBytes))
		return nil, &APIError{Status: resp.StatusCode, Messages: errorMessages(data)}
	}
	if req.bounded != nil {
		data, err := req.bounded.read(ctx, body, resp.ContentLength)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", req.method, req.pathForHumans(), stalled(ctx, err))
		}
		return data, nil
	}
	data, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read answer: %w", req.method, req.pathForHumans(), stalled(ctx, err))
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s %s: %w (more than %d bytes)", req.method, req.pathForHumans(), ErrTooLarge, limit)
	}
	return data, nil
}

func (r request) pathForHumans() string {
	p, err := url.PathUnescape(r.path)
	if err != nil {
		return r.path
	}
	return p
}

func (c *Client) observe(code string) {
	if c.opts.OnResponse != nil {
		c.opts.OnResponse(code)
	}
}

// authenticate puts the credentials on hr, logging in first if no token is held.
func (c *Client) authenticate(ctx context.Context, hr *http.Request) error {
	creds := c.opts.Credentials
	switch {
	case creds.Token != "":
		hr.Header.Set("X-INFRAHUB-KEY", creds.Token)
	case creds.Username != "":
		c.mu.Lock()
		access := c.access
		c.mu.Unlock()
		if access == "" {
			if err := c.login(ctx); err != nil {
				return err
			}
			c.mu.Lock()
			access = c.access
			c.mu.Unlock()
		}
		hr.Header.Set("Authorization", "Bearer "+access)
	}
	return nil
}

type tokens struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
}

func (c *Client) login(ctx context.Context) error {
	creds := c.opts.Credentials
	body, err := json.Marshal(map[string]string{"username": creds.Username, "password": creds.Password})
	if err != nil {
		return err
	}
	data, err := c.send(ctx, request{method: http.MethodPost, path: "/api/auth/login", body: body, auth: authNone}, maxResponseBytes)
	if err != nil {
		return fmt.Errorf("log in to Infrahub as %s: %w", creds.Username, err)
	}
	var t tokens
	if err := json.Unmarshal(data, &t); err != nil || t.AccessToken == "" {
		return fmt.Errorf("log in to Infrahub as %s: the answer holds no access token", creds.Username)
	}
	c.mu.Lock()
	c.access, c.refresh = t.AccessToken, t.RefreshToken
	c.mu.Unlock()
	return nil
}

// renew gets a new access token with the refresh token, or by logging in again when
// the refresh token is refused too.
func (c *Client) renew(ctx context.Context) error {
	c.mu.Lock()
	refresh := c.refresh
	c.access = ""
	c.mu.Unlock()
	if refresh != "" {
		data, err := c.send(ctx, request{method: http.MethodPost, path: "/api/auth/refresh", auth: authBearer, bearer: refresh}, maxResponseBytes)
		var t tokens
		if err == nil && json.Unmarshal(data, &t) == nil && t.AccessToken != "" {
			c.mu.Lock()
			c.access = t.AccessToken
			c.mu.Unlock()
			return nil
		}
		if err != nil && !IsAuthError(err) {
			return fmt.Errorf("refresh the Infrahub access token: %w", err)
		}
	}
	return c.login(ctx)
}

// scrubURL keeps the error of a failed request but drops the query of its URL, which
// may carry a time or branch but should never carry more.
func scrubURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil {
			u.RawQuery = ""
			u.User = nil
			return &url.Error{Op: ue.Op, URL: u.String(), Err: ue.Err}
		}
	}
	return err
}

func containsMessage(messages []string, want string) bool {
	for _, m := range messages {
		if strings.Contains(m, want) {
			return true
		}
	}
	return false
}

// errorMessages reads Infrahub's error envelopes: {"errors":[{"message":...}]} (REST and
// GraphQL, where a message may itself be an object) and {"errors":["..."]}.
func errorMessages(data []byte) []string {
	var env struct {
		Errors []json.RawMessage `json:"errors"`
	}
	if err := json.Unmarshal(data, &env); err != nil || len(env.Errors) == 0 {
		if text := strings.TrimSpace(string(data)); text != "" && len(text) <= 512 && !strings.ContainsAny(text, "<>") {
			return []string{text}
		}
		return nil
	}
	var out []string
	for _, raw := range env.Errors {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			out = append(out, s)
			continue
		}
		var obj struct {
			Message json.RawMessage `json:"message"`
		}
		if json.Unmarshal(raw, &obj) == nil && obj.Message != nil {
			if json.Unmarshal(obj.Message, &s) == nil {
				out = append(out, s)
			} else {
				out = append(out, string(obj.Message))
			}
			continue
		}
		out = append(out, string(raw))
	}
	return out
}
