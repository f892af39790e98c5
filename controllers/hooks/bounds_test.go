package hooks

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vidra-operator/vidra/internal/source/gitpush"
	"github.com/vidra-operator/vidra/internal/source/infrahub"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// countingBody counts the bytes a handler reads of a request's body.
type countingBody struct {
	r    *bytes.Reader
	read atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *countingBody) Close() error { return nil }

// Anyone who reaches the port may send; before, the receiver read up to 64 KiB (1 MiB for
// a push) of anyone's body before it looked for a signature. Now a delivery without one,
// or with a stale timestamp, is refused before a byte of its body is read.
func TestUnsignedDeliveriesAreRefusedBeforeTheirBodyIsRead(t *testing.T) {
	log, err := testfleet.Logger()
	if err != nil {
		t.Fatal(err)
	}
	r := &Receiver{Log: log.WithName("webhook")}
	stale := fmt.Sprint(time.Now().Add(-time.Hour).Unix())
	for name, c := range map[string]struct {
		path   string
		header map[string]string
	}{
		"infrahub, unsigned":       {InfrahubPath, nil},
		"infrahub, stale":          {InfrahubPath, map[string]string{infrahub.HeaderWebhookID: "m", infrahub.HeaderWebhookTimestamp: stale, infrahub.HeaderWebhookSignature: "v1,AAAA"}},
		"git push, unsigned":       {GitPath, nil},
		"GitHub push, unsigned":    {GitPath, map[string]string{gitpush.HeaderGitHubEvent: "push"}},
		"GitHub push, not SHA-256": {GitPath, map[string]string{gitpush.HeaderGitHubEvent: "push", gitpush.HeaderGitHubSignature: "sha256=abcd"}},
	} {
		t.Run(name, func(t *testing.T) {
			body := &countingBody{r: bytes.NewReader(bytes.Repeat([]byte("x"), 512<<10))}
			req := httptest.NewRequest(http.MethodPost, c.path, body)
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			r.Handler().ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized {
				t.Errorf("HTTP %d, want 401", rec.Code)
			}
			if n := body.read.Load(); n != 0 {
				t.Errorf("%d bytes of the body read before the signature was checked", n)
			}
		})
	}
}

// Headers are bounded (Go's default is 1 MiB per request): past the bound the server
// answers 431 before a handler runs.
func TestWebhookHeadersAreBounded(t *testing.T) {
	log, err := testfleet.Logger()
	if err != nil {
		t.Fatal(err)
	}
	r := &Receiver{Log: log.WithName("webhook")}
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = r.newServer()
	srv.Start()
	t.Cleanup(srv.Close)
	req, err := http.NewRequest(http.MethodPost, srv.URL+InfrahubPath, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Padding", strings.Repeat("p", 64<<10))
	if code := status(t, req); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("64 KiB of headers: HTTP %d, want 431", code)
	}
}

// status sends req and returns the HTTP status of the answer.
func status(t testing.TB, req *http.Request) int {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}
