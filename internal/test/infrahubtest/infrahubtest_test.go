package infrahubtest

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

const listQuery = `query($names:[String]){ CoreArtifact(name__values:$names){ count edges{ node{
    id name{value} status{value} checksum{value} storage_id{value} content_type{value}
    object{node{id display_label __typename}} definition{node{id name{value}}} }}}}`

// fakeClock is a settable clock for Options.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var t0 = time.Date(2025, 3, 13, 12, 0, 0, 0, time.UTC)

func newServer(t *testing.T, opts Options) *Server {
	t.Helper()
	s := New(opts)
	t.Cleanup(s.Close)
	return s
}

type result struct {
	status int
	header http.Header
	body   []byte
}

func (r result) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v: %s", err, r.body)
	}
	return m
}

func do(t *testing.T, s *Server, method, path string, body []byte, hdr map[string]string) result {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, s.URL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return result{status: resp.StatusCode, header: resp.Header, body: b}
}

func gql(t *testing.T, s *Server, path, query string, vars map[string]any, hdr map[string]string) result {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	h := map[string]string{"Content-Type": "application/json"}
	for k, v := range hdr {
		h[k] = v
	}
	return do(t, s, http.MethodPost, path, body, h)
}

type listAnswer struct {
	Data *struct {
		CoreArtifact struct {
			Count int `json:"count"`
			Edges []struct {
				Node struct {
					ID          string     `json:"id"`
					Name        valueField `json:"name"`
					Status      valueField `json:"status"`
					Checksum    valueField `json:"checksum"`
					StorageID   valueField `json:"storage_id"`
					ContentType valueField `json:"content_type"`
					Object      struct {
						Node objectNode `json:"node"`
					} `json:"object"`
					Definition struct {
						Node definitionNode `json:"node"`
					} `json:"definition"`
				} `json:"node"`
			} `json:"edges"`
		} `json:"CoreArtifact"`
	} `json:"data"`
	Errors []graphQLError `json:"errors"`
}

func list(t *testing.T, s *Server, path string, names ...string) listAnswer {
	t.Helper()
	r := gql(t, s, path, listQuery, map[string]any{"names": names}, nil)
	if r.status != http.StatusOK {
		t.Fatalf("POST %s: status %d: %s", path, r.status, r.body)
	}
	var a listAnswer
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatal(err)
	}
	if len(a.Errors) > 0 || a.Data == nil {
		t.Fatalf("POST %s: GraphQL errors: %s", path, r.body)
	}
	if a.Data.CoreArtifact.Count != len(a.Data.CoreArtifact.Edges) {
		t.Fatalf("count %d != %d edges", a.Data.CoreArtifact.Count, len(a.Data.CoreArtifact.Edges))
	}
	return a
}

func (a listAnswer) ids() []string {
	var out []string
	for _, e := range a.Data.CoreArtifact.Edges {
		out = append(out, e.Node.ID)
	}
	return out
}

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// restMessage checks the REST envelope and returns its message.
func restMessage(t *testing.T, r result, status int) string {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	var env struct {
		Data   *json.RawMessage `json:"data"`
		Errors []struct {
			Message    string `json:"message"`
			Extensions struct {
				Code int `json:"code"`
			} `json:"extensions"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(r.body, &env); err != nil {
		t.Fatalf("not a REST envelope: %v: %s", err, r.body)
	}
	m := r.json(t)
	if d, ok := m["data"]; !ok || d != nil {
		t.Fatalf("envelope needs \"data\":null: %s", r.body)
	}
	if len(env.Errors) != 1 || env.Errors[0].Extensions.Code != status {
		t.Fatalf("bad envelope: %s", r.body)
	}
	return env.Errors[0].Message
}

func cluster(id, name, target string) Artifact {
	return Artifact{
		ID: id, Name: name, Content: "kind: ConfigMap # " + id,
		TargetID: "t-" + target, TargetLabel: target, TargetKind: "InfraCluster",
		DefinitionID: "def-" + name, DefinitionName: name + "-def",
	}
}

func TestListByNameSeveralTargets(t *testing.T) {
	s := newServer(t, Options{AllowAnonymous: true})
	s.Put("main", cluster("a3", "k8s", "c3"))
	s.Put("main", cluster("a1", "k8s", "c1"))
	s.Put("main", cluster("a2", "other", "c2"))
	s.Put("main", Artifact{ID: "a4", Name: "k8s", Content: "{}", ContentType: "application/json", Status: "Pending",
		TargetID: "t-c4", TargetLabel: "c4", TargetKind: "InfraCluster", DefinitionID: "def-k8s", DefinitionName: "k8s-def"})

	a := list(t, s, "/graphql", "k8s")
	if got, want := a.ids(), []string{"a1", "a3", "a4"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ids %v, want %v (ordered by ID)", got, want)
	}
	n := a.Data.CoreArtifact.Edges[0].Node
	if n.Name.Value != "k8s" || n.Status.Value != "Ready" || n.ContentType.Value != "application/yaml" ||
		n.Checksum.Value != md5hex("kind: ConfigMap # a1") || n.StorageID.Value != "stor-a1" ||
		n.Object.Node != (objectNode{ID: "t-c1", DisplayLabel: "c1", Typename: "InfraCluster"}) ||
		n.Definition.Node != (definitionNode{ID: "def-k8s", Name: valueField{"k8s-def"}}) {
		t.Fatalf("node a1 = %+v", n)
	}
	last := a.Data.CoreArtifact.Edges[2].Node
	if last.Status.Value != "Pending" || last.ContentType.Value != "application/json" {
		t.Fatalf("node a4 = %+v", last)
	}

	// Every node carries exactly the documented fields.
	r := gql(t, s, "/graphql", listQuery, map[string]any{"names": []string{"other"}}, nil)
	node := r.json(t)["data"].(map[string]any)["CoreArtifact"].(map[string]any)["edges"].([]any)[0].(map[string]any)["node"].(map[string]any)
	var keys []string
	for k := range node {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"checksum", "content_type", "definition", "id", "name", "object", "status", "storage_id"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("node keys %v, want %v", keys, want)
	}

	if got := list(t, s, "/graphql", "k8s", "other").ids(); len(got) != 4 {
		t.Fatalf("two names: %v", got)
	}
	if got := list(t, s, "/graphql", "nope"); got.Data.CoreArtifact.Count != 0 || got.Data.CoreArtifact.Edges == nil {
		t.Fatalf("no match must be count 0 with an empty edges list: %+v", got)
	}

	// name__value with a single string, and a differently named variable.
	r = gql(t, s, "/graphql", `query($n:String!){CoreArtifact(name__value:$n){count edges{node{id}}}}`, map[string]any{"n": "other"}, nil)
	if c := r.json(t)["data"].(map[string]any)["CoreArtifact"].(map[string]any)["count"]; c != 1.0 {
		t.Fatalf("name__value: %s", r.body)
	}
	if s.GraphQLRequests() != 5 {
		t.Fatalf("GraphQLRequests = %d, want 5", s.GraphQLRequests())
	}
}

func TestGraphQLVariableMistakesAreErrors(t *testing.T) {
	s := newServer(t, Options{AllowAnonymous: true})
	s.Put("main", cluster("a1", "k8s", "c1"))
	for name, tc := range map[string]struct {
		query string
		vars  map[string]any
		want  string
	}{
		"undeclared": {`query($x:[String]){CoreArtifact(name__values:$names){count}}`, map[string]any{"names": []string{"k8s"}}, "is not defined"},
		"required":   {`query($names:[String]!){CoreArtifact(name__values:$names){count}}`, map[string]any{"other": "k8s"}, "was not provided"},
		"not string": {`query($names:[String]){CoreArtifact(name__values:$names){count}}`, map[string]any{"names": []int{1}}, "non string"},
		"unknown":    {`query { CoreThing { count } }`, nil, "Cannot query field 'CoreThing'"},
	} {
		t.Run(name, func(t *testing.T) {
			r := gql(t, s, "/graphql", tc.query, tc.vars, nil)
			var a listAnswer
			if err := json.Unmarshal(r.body, &a); err != nil || r.status != http.StatusOK || a.Data != nil ||
				len(a.Errors) != 1 || !strings.Contains(a.Errors[0].Message, tc.want) || len(a.Errors[0].Locations) == 0 {
				t.Fatalf("status %d body %s", r.status, r.body)
			}
		})
	}
	// An unset nullable variable omits the filter, as GraphQL does.
	r := gql(t, s, "/graphql", listQuery, nil, nil)
	if !strings.Contains(string(r.body), `"count":1`) {
		t.Fatalf("unfiltered: %s", r.body)
	}
}

func TestBranchesAreLocal(t *testing.T) {
	s := newServer(t, Options{AllowAnonymous: true})
	s.Put("main", cluster("a1", "k8s", "c1"))
	s.CreateBranch("dev")
	s.Put("main", cluster("a2", "k8s", "c2")) // after the branch: not on dev
	s.Put("dev", Artifact{ID: "a1", Name: "k8s", Content: "changed on dev"})
	s.Put("dev", cluster("d1", "k8s", "c9"))

	if got := list(t, s, "/graphql", "k8s").ids(); !reflect.DeepEqual(got, []string{"a1", "a2"}) {
		t.Fatalf("main: %v", got)
	}
	dev := list(t, s, "/graphql/dev", "k8s")
	if got := dev.ids(); !reflect.DeepEqual(got, []string{"a1", "d1"}) {
		t.Fatalf("dev: %v", got)
	}
	if dev.Data.CoreArtifact.Edges[0].Node.Checksum.Value != md5hex("changed on dev") {
		t.Fatalf("dev a1 not branch-local: %+v", dev.Data.CoreArtifact.Edges[0].Node)
	}
	// ?branch= is ignored by GraphQL.
	if got := list(t, s, "/graphql?branch=dev", "k8s").ids(); !reflect.DeepEqual(got, []string{"a1", "a2"}) {
		t.Fatalf("?branch= must be ignored: %v", got)
	}
	if a, _ := s.Artifact("main", "a1"); a.Content != "kind: ConfigMap # a1" {
		t.Fatalf("main a1 changed: %+v", a)
	}

	if r := do(t, s, http.MethodGet, "/api/artifact/d1?branch=dev", nil, nil); r.status != 200 || string(r.body) != "kind: ConfigMap # d1" {
		t.Fatalf("download on dev: %d %s", r.status, r.body)
	}
	restMessage(t, do(t, s, http.MethodGet, "/api/artifact/d1", nil, nil), http.StatusNotFound)
	if msg := restMessage(t, do(t, s, http.MethodGet, "/api/artifact/a1?branch=nope", nil, nil), http.StatusBadRequest); msg != "Branch: nope not found." {
		t.Fatalf("unknown branch message %q", msg)
	}

	s.Delete("dev", "d1")
	if got := list(t, s, "/graphql/dev", "k8s").ids(); !reflect.DeepEqual(got, []string{"a1"}) {
		t.Fatalf("after delete: %v", got)
	}
}

func TestUnknownBranchShape(t *testing.T) {
	s := newServer(t, Options{AllowAnonymous: true})
	r := gql(t, s, "/graphql/foo", listQuery, nil, nil)
	if r.status != http.StatusNotFound {
		t.Fatalf("status %d", r.status)
	}
	m := r.json(t)
	if _, ok := m["data"]; ok {
		t.Fatalf("no data key expected: %s", r.body)
	}
	if !reflect.DeepEqual(m["errors"], []any{"Branch: foo not found."}) {
		t.Fatalf("errors: %s", r.body)
	}
}

func TestWrongContentType(t *testing.T) {
	s := newServer(t, Options{AllowAnonymous: true})
	body, _ := json.Marshal(map[string]any{"query": listQuery})
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded"} {
		r := do(t, s, http.MethodPost, "/graphql", body, map[string]string{"Content-Type": ct})
		errs, ok := r.json(t)["errors"].([]any)
		if r.status != http.StatusBadRequest || !ok || len(errs) != 1 {
			t.Fatalf("%q: %d %s", ct, r.status, r.body)
		}
		if _, isString := errs[0].(string); !isString {
			t.Fatalf("%q: errors must be strings: %s", ct, r.body)
		}
	}
	r := do(t, s, http.MethodPost, "/graphql", body, map[string]string{"Content-Type": "application/json; charset=utf-8"})
	if r.status != http.StatusOK {
		t.Fatalf("charset parameter must be accepted: %d %s", r.status, r.body)
	}
	r = do(t, s, http.MethodPost, "/graphql", []byte("{not json"), map[string]string{"Content-Type": "application/json"})
	if r.status != http.StatusBadRequest {
		t.Fatalf("malformed JSON: %d %s", r.status, r.body)
	}
}

func TestTimeTravel(t *testing.T) {
	clk := &fakeClock{t: t0}
	s := newServer(t, Options{AllowAnonymous: true, Now: clk.Now})
	clk.Advance(time.Minute)
	s.Put("main", Artifact{ID: "a1", Name: "k8s", Content: "v1", ContentType: "text/plain"}) // t0+1m
	clk.Advance(2 * time.Hour)
	s.Put("main", Artifact{ID: "a1", Name: "k8s", Content: "v2", ContentType: "text/plain"}) // t0+2h1m
	s.Put("main", Artifact{ID: "a2", Name: "k8s", Content: "new"})
	clk.Advance(time.Hour) // now t0+3h1m

	checksums := func(at string) []string {
		a := list(t, s, "/graphql?at="+url.QueryEscape(at), "k8s")
		var out []string
		for _, e := range a.Data.CoreArtifact.Edges {
			out = append(out, e.Node.ID+"="+e.Node.Checksum.Value)
		}
		return out
	}
	v1 := []string{"a1=" + md5hex("v1")}
	v2 := []string{"a1=" + md5hex("v2"), "a2=" + md5hex("new")}
	for at, want := range map[string][]string{
		"2025-03-13T13:00:00Z":           v1,
		"2025-03-13T15:00:00+01:00":      v1, // 14:00Z
		"2025-03-13T14:01:00":            v2, // no offset = UTC; exactly the second Put
		"2025-03-13T14:00:59.999Z":       v1,
		"2025-03-13T11:59:00Z":           nil, // before main's first snapshot
		"2h":                             v1,  // t0+1h1m
		"1h30m":                          v1,  // t0+1h31m
		"2hours":                         v1,
		"30min":                          v2,
		"3h":                             v1,  // exactly the first Put
		"3h1m":                           nil, // main's creation, before any Put
		"3h1m1sec":                       nil,
		"3601s":                          v1, // t0+2h0m59s, just before the second Put
		"1h0m1s":                         v1,
		"2025-03-13 14:30:00.123456789Z": v2,
	} {
		if got := checksums(at); !reflect.DeepEqual(got, want) {
			t.Errorf("at=%s: %v, want %v", at, got, want)
		}
	}

	// Download at a time serves the content of that time.
	r := do(t, s, http.MethodGet, "/api/artifact/a1?at=2h", nil, nil)
	if r.status != 200 || string(r.body) != "v1" {
		t.Fatalf("download at=2h: %d %s", r.status, r.body)
	}
	restMessage(t, do(t, s, http.MethodGet, "/api/artifact/a2?at=2h", nil, nil), http.StatusNotFound)

	for _, bad := range []string{"now-2h", "yesterday", "2h 30m", "-1h", "2025-13-01T00:00:00Z", "10d"} {
		q := "?at=" + url.QueryEscape(bad)
		if msg := restMessage(t, gql(t, s, "/graphql"+q, listQuery, nil, nil), http.StatusBadRequest); msg != "Invalid time format for "+bad {
			t.Errorf("graphql at=%q: message %q", bad, msg)
		}
		restMessage(t, do(t, s, http.MethodGet, "/api/artifact/a1"+q, nil, nil), http.StatusBadRequest)
		restMessage(t, do(t, s, http.MethodGet, "/api/query/ArtifactIDs"+q+"&artifactname=k8s", nil, nil), http.StatusBadRequest)
	}
}

func TestDownloads(t *testing.T) {
	s := newServer(t, Options{AllowAnonymous: true})
	s.Put("main", Artifact{ID: "a1", Name: "k8s", Content: `{"a":1}`, ContentType: "application/json"})
	s.Put("main", Artifact{ID: "a2", Name: "k8s", Content: "kind: X"})
	for i := 0; i < 2; i++ {
		r := do(t, s, http.MethodGet, "/api/artifact/a1", nil, nil)
		if r.status != 200 || string(r.body) != `{"a":1}` || r.header.Get("Content-Type") != "application/json" {
			t.Fatalf("a1: %d %q %s", r.status, r.header.Get("Content-Type"), r.body)
		}
	}
	r := do(t, s, http.MethodGet, "/api/artifact/a2?branch=main", nil, nil)
	if r.header.Get("Content-Type") != "application/yaml" {
		t.Fatalf("default content type %q", r.header.Get("Content-Type"))
	}
	restMessage(t, do(t, s, http.MethodGet, "/api/artifact/missing", nil, nil), http.StatusNotFound)
	if s.Downloads("a1") != 2 || s.Downloads("a2") != 1 || s.Downloads("missing") != 0 || s.TotalDownloads() != 3 {
		t.Fatalf("counts a1=%d a2=%d total=%d", s.Downloads("a1"), s.Downloads("a2"), s.TotalDownloads())
	}

	// Storage objects: raw bytes of the current main artifact, not counted.
	r = do(t, s, http.MethodGet, "/api/storage/object/stor-a2", nil, nil)
	if r.status != 200 || string(r.body) != "kind: X" {
		t.Fatalf("storage: %d %s", r.status, r.body)
	}
	restMessage(t, do(t, s, http.MethodGet, "/api/storage/object/nope", nil, nil), http.StatusNotFound)
	if s.TotalDownloads() != 3 {
		t.Fatalf("storage reads must not count")
	}
	restMessage(t, do(t, s, http.MethodGet, "/api/nothing", nil, nil), http.StatusNotFound)
}

func TestChecksumOverride(t *testing.T) {
	s := newServer(t, Options{AllowAnonymous: true})
	s.Put("main", Artifact{ID: "a1", Name: "k8s", Content: "real", Checksum: "00000000000000000000000000000000", StorageID: "blob-1"})
	n := list(t, s, "/graphql", "k8s").Data.CoreArtifact.Edges[0].Node
	if n.Checksum.Value != "00000000000000000000000000000000" || n.StorageID.Value != "blob-1" {
		t.Fatalf("node %+v", n)
	}
	r := do(t, s, http.MethodGet, "/api/artifact/a1", nil, nil)
	if r.status != 200 || md5hex(string(r.body)) == n.Checksum.Value {
		t.Fatalf("content must be served and must not match the stored checksum: %d %s", r.status, r.body)
	}
	s.Put("main", Artifact{ID: "a2", Content: "x"})
	if a, ok := s.Artifact("main", "a2"); !ok || a.Checksum != md5hex("x") || a.StorageID != "stor-a2" || a.Status != "Ready" || a.ContentType != "application/yaml" {
		t.Fatalf("defaults: %+v", a)
	}
	if _, ok := s.Artifact("main", "zz"); ok {
		t.Fatal("unknown artifact found")
	}
}

func TestGraphQLErrorsFault(t *testing.T) {
	s := newServer(t, Options{AllowAnonymous: true})
	s.Put("main", cluster("a1", "k8s", "c1"))
	s.SetFault(Fault{Path: "/graphql", GraphQLErrors: []string{"boom", "bang"}})
	r := gql(t, s, "/graphql", listQuery, map[string]any{"names": []string{"k8s"}}, nil)
	m := r.json(t)
	if r.status != http.StatusOK || m["data"] != nil {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if _, ok := m["data"]; !ok {
		t.Fatalf("data must be present and null: %s", r.body)
	}
	var a listAnswer
	_ = json.Unmarshal(r.body, &a)
	if len(a.Errors) != 2 || a.Errors[0].Message != "boom" || len(a.Errors[0].Locations) == 0 || len(a.Errors[0].Path) == 0 {
		t.Fatalf("errors %s", r.body)
	}
	// The fault is scoped to its path.
	if r := do(t, s, http.MethodGet, "/api/artifact/a1", nil, nil); r.status != 200 {
		t.Fatalf("download under a /graphql fault: %d", r.status)
	}
	// On a stored query the same fault is Infrahub's 502.
	s.SetFault(Fault{Path: "/api/query/", GraphQLErrors: []string{"boom"}})
	r = do(t, s, http.MethodGet, "/api/query/ArtifactIDs?artifactname=k8s", nil, nil)
	if r.status != http.StatusBadGateway || !strings.Contains(string(r.body), `"code":502`) || !strings.Contains(string(r.body), "boom") {
		t.Fatalf("stored query fault: %d %s", r.status, r.body)
	}
	s.SetFault(Fault{})
	if got := list(t, s, "/graphql", "k8s").ids(); len(got) != 1 {
		t.Fatalf("after clearing: %v", got)
	}
}

func TestTokenAuthAndAnonymousOff(t *testing.T) {
	s := newServer(t, Options{Token: "secret"})
	s.Put("main", cluster("a1", "k8s", "c1"))

	if msg := restMessage(t, do(t, s, http.MethodGet, "/api/artifact/a1", nil, nil), 401); msg != "Authentication is required" {
		t.Fatalf("anonymous: %q", msg)
	}
	if msg := restMessage(t, gql(t, s, "/graphql", listQuery, nil, nil), 401); msg != "Authentication is required" {
		t.Fatalf("anonymous graphql: %q", msg)
	}
	if msg := restMessage(t, do(t, s, http.MethodGet, "/api/artifact/a1", nil, map[string]string{"X-INFRAHUB-KEY": "wrong"}), 401); msg != "Invalid token" {
		t.Fatalf("wrong key: %q", msg)
	}
	if r := do(t, s, http.MethodGet, "/api/artifact/a1", nil, map[string]string{"X-INFRAHUB-KEY": "secret"}); r.status != 200 {
		t.Fatalf("good key: %d %s", r.status, r.body)
	}
	if r := gql(t, s, "/graphql", listQuery, nil, map[string]string{"X-INFRAHUB-KEY": "secret"}); r.status != 200 {
		t.Fatalf("good key graphql: %d %s", r.status, r.body)
	}
	if msg := restMessage(t, do(t, s, http.MethodGet, "/api/artifact/a1", nil, map[string]string{"Authorization": "Bearer junk"}), 401); msg != "Invalid token" {
		t.Fatalf("junk bearer: %q", msg)
	}

	// With no token configured, any key is invalid.
	s2 := newServer(t, Options{AllowAnonymous: true})
	restMessage(t, do(t, s2, http.MethodGet, "/api/artifact/x", nil, map[string]string{"X-INFRAHUB-KEY": "secret"}), 401)

	// Anonymous on: GET and GraphQL reads pass, an anonymous REST POST does not.
	if r := do(t, s2, http.MethodGet, "/api/query/ArtifactIDs?artifactname=x", nil, nil); r.status != 200 {
		t.Fatalf("anonymous GET query: %d %s", r.status, r.body)
	}
	restMessage(t, do(t, s2, http.MethodPost, "/api/query/ArtifactIDs", []byte(`{"variables":{"artifactname":"x"}}`), nil), 401)
}

func TestLoginExpiryRefresh(t *testing.T) {
	clk := &fakeClock{t: t0}
	s := newServer(t, Options{Users: map[string]string{"admin": "pw"}, AccessTokenTTL: 10 * time.Minute, Now: clk.Now})
	s.Put("main", cluster("a1", "k8s", "c1"))

	login := func(user, pw string) result {
		b, _ := json.Marshal(map[string]string{"username": user, "password": pw})
		return do(t, s, http.MethodPost, "/api/auth/login", b, map[string]string{"Content-Type": "application/json"})
	}
	restMessage(t, login("ghost", "pw"), http.StatusNotFound)
	if msg := restMessage(t, login("admin", "bad"), 401); msg != "Incorrect password" {
		t.Fatalf("bad password: %q", msg)
	}
	r := login("admin", "pw")
	var toks struct {
		Access  string `json:"access_token"`
		Refresh string `json:"refresh_token"`
	}
	if err := json.Unmarshal(r.body, &toks); r.status != 200 || err != nil || toks.Access == "" || toks.Refresh == "" {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	if s.Logins() != 1 {
		t.Fatalf("Logins = %d", s.Logins())
	}
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	if r := do(t, s, http.MethodGet, "/api/artifact/a1", nil, bearer(toks.Access)); r.status != 200 {
		t.Fatalf("with access token: %d %s", r.status, r.body)
	}
	if r := gql(t, s, "/graphql", listQuery, nil, bearer(toks.Access)); r.status != 200 {
		t.Fatalf("graphql with access token: %d %s", r.status, r.body)
	}
	// A refresh token is not an access token.
	restMessage(t, do(t, s, http.MethodGet, "/api/artifact/a1", nil, bearer(toks.Refresh)), 401)

	clk.Advance(10 * time.Minute)
	if msg := restMessage(t, do(t, s, http.MethodGet, "/api/artifact/a1", nil, bearer(toks.Access)), 401); msg != "Expired Signature" {
		t.Fatalf("expired: %q", msg)
	}

	refresh := func(tok string) result {
		return do(t, s, http.MethodPost, "/api/auth/refresh", nil, bearer(tok))
	}
	if msg := restMessage(t, refresh("junk"), 401); msg != "Invalid token" {
		t.Fatalf("bad refresh: %q", msg)
	}
	restMessage(t, refresh(toks.Access), 401)
	r = refresh(toks.Refresh)
	var fresh struct {
		Access string `json:"access_token"`
	}
	if err := json.Unmarshal(r.body, &fresh); r.status != 200 || err != nil || fresh.Access == "" {
		t.Fatalf("refresh: %d %s", r.status, r.body)
	}
	if r := do(t, s, http.MethodGet, "/api/artifact/a1", nil, bearer(fresh.Access)); r.status != 200 {
		t.Fatalf("refreshed token: %d %s", r.status, r.body)
	}

	s.ExpireAccessTokens()
	if msg := restMessage(t, do(t, s, http.MethodGet, "/api/artifact/a1", nil, bearer(fresh.Access)), 401); msg != "Expired Signature" {
		t.Fatalf("ExpireAccessTokens: %q", msg)
	}
	r = refresh(toks.Refresh)
	_ = json.Unmarshal(r.body, &fresh)
	if r := do(t, s, http.MethodGet, "/api/artifact/a1", nil, bearer(fresh.Access)); r.status != 200 {
		t.Fatalf("token issued after ExpireAccessTokens: %d", r.status)
	}
	if s.Refreshes() != 2 || s.Logins() != 1 {
		t.Fatalf("Refreshes=%d Logins=%d", s.Refreshes(), s.Logins())
	}

	clk.Advance(31 * 24 * time.Hour)
	if msg := restMessage(t, refresh(toks.Refresh), 401); msg != "Expired Signature" {
		t.Fatalf("expired refresh token: %q", msg)
	}
}

func TestStoredQueryArtifactIDs(t *testing.T) {
	s := newServer(t, Options{Token: "k"})
	s.Put("main", cluster("a2", "k8s", "c2"))
	s.Put("main", cluster("a1", "k8s", "c1"))
	s.Put("main", cluster("a3", "other", "c3"))
	s.CreateBranch("dev")
	s.Put("dev", cluster("d1", "k8s", "c4"))
	key := map[string]string{"X-INFRAHUB-KEY": "k"}

	type answer struct {
		Data struct {
			CoreArtifact struct {
				Count int `json:"count"`
				Edges []struct {
					Node struct {
						ID        string     `json:"id"`
						Name      valueField `json:"name"`
						Checksum  valueField `json:"checksum"`
						StorageID struct {
							ID string `json:"id"`
						} `json:"storage_id"`
						Status valueField `json:"status"`
						Object struct {
							Node objectNode `json:"node"`
						} `json:"object"`
					} `json:"node"`
				} `json:"edges"`
			} `json:"CoreArtifact"`
		} `json:"data"`
	}
	decode := func(r result) answer {
		t.Helper()
		var a answer
		if err := json.Unmarshal(r.body, &a); r.status != 200 || err != nil {
			t.Fatalf("%d %s", r.status, r.body)
		}
		return a
	}

	get := decode(do(t, s, http.MethodGet, "/api/query/ArtifactIDs?artifactname=k8s&update_group=false", nil, key))
	post := decode(do(t, s, http.MethodPost, "/api/query/ArtifactIDs?branch=main", []byte(`{"variables":{"artifactname":"k8s"}}`), key))
	if !reflect.DeepEqual(get, post) {
		t.Fatalf("GET and POST differ: %+v vs %+v", get, post)
	}
	c := get.Data.CoreArtifact
	if c.Count != 2 || len(c.Edges) != 2 || c.Edges[0].Node.ID != "a1" || c.Edges[1].Node.ID != "a2" {
		t.Fatalf("answer %+v", c)
	}
	n := c.Edges[0].Node
	if n.StorageID.ID != "stor-a1" || n.Checksum.Value != md5hex("kind: ConfigMap # a1") || n.Name.Value != "k8s" ||
		n.Status.Value != "Ready" || n.Object.Node.DisplayLabel != "c1" {
		t.Fatalf("node %+v", n)
	}
	dev := decode(do(t, s, http.MethodGet, "/api/query/ArtifactIDs?branch=dev&artifactname=k8s", nil, key))
	if dev.Data.CoreArtifact.Count != 3 {
		t.Fatalf("dev: %+v", dev)
	}

	restMessage(t, do(t, s, http.MethodGet, "/api/query/Nope?artifactname=k8s", nil, key), http.StatusNotFound)
	restMessage(t, do(t, s, http.MethodGet, "/api/query/ArtifactIDs?branch=nope&artifactname=k8s", nil, key), http.StatusBadRequest)
	r := do(t, s, http.MethodPost, "/api/query/ArtifactIDs", nil, key)
	if r.status != http.StatusBadGateway || !strings.Contains(string(r.body), "artifactname") {
		t.Fatalf("missing variable: %d %s", r.status, r.body)
	}
}

func TestFaultTimes(t *testing.T) {
	s := newServer(t, Options{AllowAnonymous: true})
	s.Put("main", cluster("a1", "k8s", "c1"))
	s.SetFault(Fault{Path: "/api/artifact/", Status: http.StatusServiceUnavailable, Times: 2})
	for i := 0; i < 2; i++ {
		restMessage(t, do(t, s, http.MethodGet, "/api/artifact/a1", nil, nil), http.StatusServiceUnavailable)
	}
	if r := do(t, s, http.MethodGet, "/api/artifact/a1", nil, nil); r.status != 200 {
		t.Fatalf("fault should have cleared: %d", r.status)
	}
	if s.Downloads("a1") != 1 {
		t.Fatalf("faulted downloads must not count: %d", s.Downloads("a1"))
	}

	// Faults come before auth and apply to GraphQL with a string-errors body.
	s.SetFault(Fault{Path: "/graphql", Status: http.StatusInternalServerError, Times: 1})
	r := gql(t, s, "/graphql/nope", listQuery, nil, nil)
	if r.status != 500 || !reflect.DeepEqual(r.json(t)["errors"], []any{"Internal Server Error"}) {
		t.Fatalf("graphql status fault: %d %s", r.status, r.body)
	}

	// A raw body, and a custom message on every path.
	s.SetFault(Fault{Body: "<html>proxy</html>", Times: 1})
	if r := do(t, s, http.MethodGet, "/api/artifact/a1", nil, nil); r.status != 200 || string(r.body) != "<html>proxy</html>" {
		t.Fatalf("body fault: %d %s", r.status, r.body)
	}
	s.SetFault(Fault{Status: 401, Message: "Expired Signature"})
	for i := 0; i < 3; i++ {
		if msg := restMessage(t, do(t, s, http.MethodGet, "/api/storage/object/x", nil, nil), 401); msg != "Expired Signature" {
			t.Fatalf("message %q", msg)
		}
	}
	s.SetFault(Fault{})
	restMessage(t, do(t, s, http.MethodGet, "/api/storage/object/x", nil, nil), 404)
}

func TestFaultDelay(t *testing.T) {
	s := newServer(t, Options{AllowAnonymous: true})
	s.Put("main", cluster("a1", "k8s", "c1"))

	// A long delay ends when the client gives up, so Close does not hang.
	s.SetFault(Fault{Path: "/api/artifact/", Delay: time.Minute, Times: 1})
	c := *s.Client() // a copy: the shared client must keep no timeout
	c.Timeout = 50 * time.Millisecond
	start := time.Now()
	resp, err := c.Get(s.URL() + "/api/artifact/a1")
	if err == nil {
		resp.Body.Close()
	}
	var ue *url.Error
	if !errors.As(err, &ue) || !ue.Timeout() {
		t.Fatalf("want a client timeout, got %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("delay ignored the client timeout")
	}
	if r := do(t, s, http.MethodGet, "/api/artifact/a1", nil, nil); r.status != 200 {
		t.Fatalf("after Times:1 delay: %d", r.status)
	}

	// A delay alone delays a normal answer.
	s.SetFault(Fault{Delay: 30 * time.Millisecond, Times: 1})
	start = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/api/artifact/a1", nil)
	resp, err = s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "kind: ConfigMap # a1" || time.Since(start) < 30*time.Millisecond {
		t.Fatalf("delayed answer: %d %s after %v", resp.StatusCode, body, time.Since(start))
	}
}

func TestTLS(t *testing.T) {
	s := newServer(t, Options{TLS: true, AllowAnonymous: true})
	s.Put("main", cluster("a1", "k8s", "c1"))
	if !strings.HasPrefix(s.URL(), "https://") {
		t.Fatalf("URL %s", s.URL())
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.CACertPEM()) {
		t.Fatal("CACertPEM is not a PEM certificate")
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := c.Get(s.URL() + "/api/artifact/a1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if newServer(t, Options{}).CACertPEM() != nil {
		t.Fatal("CACertPEM without TLS must be nil")
	}
}

func TestConcurrentUse(t *testing.T) {
	s := newServer(t, Options{AllowAnonymous: true})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				s.Put("main", Artifact{ID: "a1", Name: "k8s", Content: strings.Repeat("x", j)})
				s.SetFault(Fault{Path: "/nothing", Times: 1, Status: 500})
				_ = s.Downloads("a1")
			}
		}()
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				resp, err := http.Get(s.URL() + "/api/artifact/a1")
				if err == nil {
					resp.Body.Close()
				}
			}
		}()
	}
	wg.Wait()
}

func TestParseAt(t *testing.T) {
	now := t0
	for in, want := range map[string]time.Time{
		"2025-03-13T10:00:00Z":       time.Date(2025, 3, 13, 10, 0, 0, 0, time.UTC),
		"2025-03-13T10:00:00-02:00":  time.Date(2025, 3, 13, 12, 0, 0, 0, time.UTC),
		"2025-03-13T10:00:00+0100":   time.Date(2025, 3, 13, 9, 0, 0, 0, time.UTC),
		"2025-03-13T10:00:00.5":      time.Date(2025, 3, 13, 10, 0, 0, 5e8, time.UTC),
		"2025-03-13":                 time.Date(2025, 3, 13, 0, 0, 0, 0, time.UTC),
		"45s":                        now.Add(-45 * time.Second),
		"10sec":                      now.Add(-10 * time.Second),
		"5m":                         now.Add(-5 * time.Minute),
		"5min":                       now.Add(-5 * time.Minute),
		"1hour":                      now.Add(-time.Hour),
		"1h30m":                      now.Add(-90 * time.Minute),
		"1h30min15s":                 now.Add(-(90*time.Minute + 15*time.Second)),
		"2025-03-13 10:00:00.000001": time.Date(2025, 3, 13, 10, 0, 0, 1000, time.UTC),
	} {
		got, ok, err := parseAt(in, now)
		if err != nil || !ok || !got.Equal(want) {
			t.Errorf("parseAt(%q) = %v %v %v, want %v", in, got, ok, err, want)
		}
	}
	if _, ok, err := parseAt("", now); ok || err != nil {
		t.Errorf("empty at must mean now")
	}
	for _, bad := range []string{"now", "now-2h", "h", "1x", "1h-30m", "99999999999999999999h", "9223372036854775807h"} {
		if _, _, err := parseAt(bad, now); err == nil {
			t.Errorf("parseAt(%q) accepted", bad)
		}
	}
}
