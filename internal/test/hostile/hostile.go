// Package hostile serves what a hostile source answers: replies that never end, each
// counting what it wrote, so that a test tells how much its client read before it
// stopped.
package hostile

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
)

// Cap is where an endless reply stops after all, so that a client without a bound ends
// (with more than any bound) rather than taking the machine.
const Cap = 512 << 20

// Counter counts the bytes a handler wrote.
type Counter struct{ n atomic.Int64 }

// Written is what the handler wrote so far.
func (c *Counter) Written() int64 { return c.n.Load() }

// endless writes chunk over and over, up to Cap bytes, until the client stops reading.
func (c *Counter) endless(w http.ResponseWriter, chunk []byte) {
	for c.n.Load() < Cap {
		n, err := w.Write(chunk)
		c.n.Add(int64(n))
		if err != nil {
			return
		}
	}
}

// GitRefs is a smart-HTTP Git server whose /info/refs answers status: with 200, a ref
// advertisement that never ends; with anything else, a body that never ends.
func GitRefs(status int, c *Counter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/info/refs") {
			http.NotFound(w, r)
			return
		}
		if status != http.StatusOK {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(status)
			c.endless(w, bytes.Repeat([]byte("denied "), 1<<13))
			return
		}
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		var head bytes.Buffer
		writePkt(&head, "# service=git-upload-pack\n")
		head.WriteString("0000")
		writePkt(&head, "0123456789012345678901234567890123456789 HEAD\x00symref=HEAD:refs/heads/main\n")
		_, _ = w.Write(head.Bytes())
		var chunk bytes.Buffer
		for i := range 512 {
			writePkt(&chunk, fmt.Sprintf("0123456789012345678901234567890123456789 refs/heads/branch-%06d\n", i))
		}
		c.endless(w, chunk.Bytes())
	})
}

// GitRefsAfter answers as real does, but for the ref advertisements after the first n,
// which never end: a remote that lets a listing pass and floods the clone that follows.
func GitRefsAfter(n int, real http.Handler, c *Counter) http.Handler {
	endless := GitRefs(http.StatusOK, c)
	var seen atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/info/refs") && seen.Add(1) > int64(n) {
			endless.ServeHTTP(w, r)
			return
		}
		real.ServeHTTP(w, r)
	})
}

func writePkt(b *bytes.Buffer, line string) {
	fmt.Fprintf(b, "%04x%s", len(line)+4, line)
}

// OCITags is a registry whose repositories' tag lists never end: with pages, every page
// holds a thousand tags and links to the next; without, one page whose body never ends.
func OCITags(pages bool, c *Counter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/":
			w.WriteHeader(http.StatusOK)
		case strings.HasSuffix(r.URL.Path, "/tags/list"):
			name := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v2/"), "/tags/list")
			w.Header().Set("Content-Type", "application/json")
			if !pages {
				_, _ = fmt.Fprintf(w, `{"name":%q,"tags":["1.0.0"`, name)
				c.endless(w, bytes.Repeat([]byte(`,"1.0.0"`), 1<<12))
				return
			}
			if c.Written() >= Cap {
				_, _ = fmt.Fprintf(w, `{"name":%q,"tags":[]}`, name)
				return
			}
			page := r.URL.Query().Get("last") + "x"
			w.Header().Set("Link", fmt.Sprintf(`</v2/%s/tags/list?n=1000&last=%s>; rel="next"`, name, page))
			var body bytes.Buffer
			fmt.Fprintf(&body, `{"name":%q,"tags":[`, name)
			for i := range 1000 {
				if i > 0 {
					body.WriteByte(',')
				}
				fmt.Fprintf(&body, `"0.%d.%d"`, len(page), i)
			}
			body.WriteString("]}")
			n, _ := w.Write(body.Bytes())
			c.n.Add(int64(n))
		default:
			http.NotFound(w, r)
		}
	})
}
