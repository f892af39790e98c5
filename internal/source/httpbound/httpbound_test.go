package httpbound_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/vidra-operator/vidra/internal/source/httpbound"
)

func TestABodyIsReadWithinItsBudget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bodies []string
		max    int64
		over   bool
	}{
		{"under", []string{"abc"}, 4, false},
		{"exactly at the bound", []string{"abcd"}, 4, false},
		{"one byte over", []string{"abcde"}, 4, true},
		{"several bodies share it", []string{"ab", "cd", "e"}, 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := httpbound.NewBudget(tc.max)
			var read strings.Builder
			var lastErr error
			for _, body := range tc.bodies {
				got, err := io.ReadAll(b.Body(io.NopCloser(strings.NewReader(body))))
				read.Write(got)
				if err != nil {
					lastErr = err
				}
			}
			if b.Over() != tc.over || (tc.over != errors.Is(lastErr, httpbound.ErrOver)) {
				t.Fatalf("Over() = %v, error %v; want over %v", b.Over(), lastErr, tc.over)
			}
			if int64(read.Len()) > tc.max || b.Spent() != int64(read.Len()) {
				t.Errorf("read %d bytes (spent %d) within a budget of %d", read.Len(), b.Spent(), tc.max)
			}
		})
	}
}

func TestACAWithoutACertificateIsRefused(t *testing.T) {
	base, err := httpbound.Default()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := httpbound.Trusting(base, []byte("not a certificate")); !errors.Is(err, httpbound.ErrNoCertificate) {
		t.Fatalf("Trusting(garbage) = %v, want ErrNoCertificate", err)
	}
	got, err := httpbound.Trusting(base, nil)
	if err != nil || got == base || (got.TLSClientConfig != nil && got.TLSClientConfig.RootCAs != nil) {
		t.Fatalf("Trusting(no CA) = %v, %v; want a clone of the base trusting the system's roots", got, err)
	}
	var _ http.RoundTripper = httpbound.Transport{}
}
