package infrahubsync

import (
	"net/url"
	"strings"
	"time"
)

// sourceBusyRetry is about how soon an InfrahubSync whose Infrahub holds its share of the
// workers looks again.
const sourceBusyRetry = 2 * time.Second

// sourceKey names the Infrahub a URL reaches, for the share of workers: its scheme, host
// and port, whatever the path. A URL that does not parse is its own key.
func sourceKey(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return rawURL
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}
