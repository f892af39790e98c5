package fairshare

import (
	"net/url"
	"strings"
	"time"
)

// BusyRetry is about how soon an item turned away because its key holds its share looks
// again (jittered by Retry).
const BusyRetry = 2 * time.Second

// SourceKey is the key of the server a source URL reaches, for the share of workers: its
// scheme, host and port, whatever the path (https://git.example/a and /b are one Git
// host, oci://registry.example/x one registry). A URL that does not parse, or names no
// host (an scp-like Git address), is its own key.
func SourceKey(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return rawURL
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}
