package hostile

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
)

// Sources are a server of each hostile kind on loopback (a Git ref advertisement that
// never ends, a Git refusal whose body never ends, an OCI tag list of endless pages, a
// Helm repository whose chart asks for 1.5 GB), and the syncs a tenant writes of them.
type Sources struct {
	// Refs, Refusal and Tags count what the Git and OCI servers wrote.
	Refs, Refusal, Tags Counter
	// Syncs are one sync of each server.
	Syncs   []Sync
	servers []*httptest.Server
}

// Sync is a sync of a hostile server, and what it shows once the operator stopped
// reading: Ready=False with Reason, Stalled too when Stalled, Text in the message.
type Sync struct {
	Kind, Name string
	Reason     string
	Stalled    bool
	Text       string
	source     string
}

// Start starts the servers; Close stops them.
func Start() (*Sources, error) {
	charts, err := HelmRepo()
	if err != nil {
		return nil, err
	}
	s := &Sources{}
	serve := func(h http.Handler) string {
		srv := httptest.NewServer(h)
		s.servers = append(s.servers, srv)
		return srv.URL
	}
	refs, refusal := serve(GitRefs(http.StatusOK, &s.Refs)), serve(GitRefs(http.StatusUnauthorized, &s.Refusal))
	tags, repo := serve(OCITags(true, &s.Tags)), serve(charts)
	const limit = "LimitExceeded"
	s.Syncs = []Sync{
		{"GitSync", "hostile-refs", limit, true, "the bound of a ref advertisement", gitSource(refs)},
		{"GitSync", "hostile-refusal", "AuthenticationFailed", false, "authenticate to", gitSource(refusal)},
		{"OCISync", "hostile-tags", limit, true, "MaxTagListPages",
			"url: oci://" + strings.TrimPrefix(tags, "http://") + "/team/app\n    insecureAllowHTTP: true\n    ref: {semver: \">=1.0.0\"}"},
		{"HelmSync", "hostile-chart", limit, true, "--helm-render-max-memory",
			"repoURL: " + repo + "\n    chart: hostile\n    insecureAllowHTTP: true"},
	}
	return s, nil
}

func gitSource(url string) string {
	return "url: " + url + "/app.git\n    insecureAllowHTTP: true\n    ref: {branch: main}"
}

// Sent is what the Git and OCI servers wrote in all.
func (s *Sources) Sent() int64 { return s.Refs.Written() + s.Refusal.Written() + s.Tags.Written() }

// Close stops the servers.
func (s *Sources) Close() {
	for _, srv := range s.servers {
		srv.Close()
	}
}

// Manifest is the sync's YAML, delivering to cluster, in namespace hostile, looked at
// every minute.
func (y Sync) Manifest(cluster string) []byte {
	return fmt.Appendf(nil, `apiVersion: infrahub.operators.com/v1alpha1
kind: %s
metadata:
  name: %s
spec:
  interval: 1m
  source:
    %s
  destination:
    cluster: %s
    namespace: hostile
`, y.Kind, y.Name, y.source, cluster)
}
