package infrahub

import (
	"context"
	"crypto/md5" //nolint:gosec // Infrahub's artifact checksum is MD5; it detects corruption, not tampering.
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// Artifact statuses in Infrahub; only Ready artifacts have content worth delivering.
const (
	StatusReady = "Ready"
	StatusError = "Error"
)

// Artifact is one artifact as a listing reports it. Several artifacts share a name: one
// per target.
type Artifact struct {
	ID          string
	Name        string
	Status      string
	Checksum    string
	ContentType string
	// Target is the node the artifact was rendered for.
	Target Target
	// Definition is the name of the artifact's definition, when the listing gives it.
	Definition string
}

// Target is the node an artifact was rendered for.
type Target struct {
	ID    string
	Label string
	Kind  string
}

// Snapshot is where and when Infrahub is read: a branch, and a point in time in
// Infrahub's `at` form (empty: the latest state).
type Snapshot struct {
	Branch string
	At     string
}

func (s Snapshot) query() url.Values {
	q := url.Values{}
	if s.At != "" {
		q.Set("at", s.At)
	}
	return q
}

// ErrTooLarge is an answer larger than the client accepts.
var ErrTooLarge = errors.New("answer too large")

// MaxArtifactBytes is the largest artifact content downloaded. Content too large to be
// inline in a VidraResource goes to the content store, which takes up to 64 MiB.
const MaxArtifactBytes = 64 << 20

// ChecksumMismatchError is content whose MD5 is not the checksum Infrahub reported.
type ChecksumMismatchError struct {
	ID   string
	Want string
	Got  string
}

func (e *ChecksumMismatchError) Error() string {
	return fmt.Sprintf("artifact %s: content has checksum %s, Infrahub reports %s", e.ID, e.Got, e.Want)
}

// artifactsQuery lists every artifact of the given names, with what delivering needs.
const artifactsQuery = `query Artifacts($names: [String], $offset: Int, $limit: Int) {
  CoreArtifact(name__values: $names, offset: $offset, limit: $limit) {
    count
    edges { node {
      id
      name { value }
      status { value }
      checksum { value }
      content_type { value }
      object { node { id display_label __typename } }
      definition { node { id name { value } } }
    } }
  }
}`

// artifactNode is one artifact in a GraphQL or stored-query answer. Stored queries are
// written by users, so every field but id is optional.
type artifactNode struct {
	ID          string     `json:"id"`
	Name        valueField `json:"name"`
	Status      valueField `json:"status"`
	Checksum    valueField `json:"checksum"`
	ContentType valueField `json:"content_type"`
	Object      struct {
		Node *struct {
			ID           string `json:"id"`
			DisplayLabel string `json:"display_label"`
			Typename     string `json:"__typename"`
		} `json:"node"`
	} `json:"object"`
	Definition struct {
		Node *struct {
			Name valueField `json:"name"`
		} `json:"node"`
	} `json:"definition"`
}

type valueField struct {
	Value *string `json:"value"`
}

func (v valueField) String() string {
	if v.Value == nil {
		return ""
	}
	return *v.Value
}

type artifactsData struct {
	CoreArtifact *struct {
		Count *int `json:"count"`
		Edges []struct {
			Node *artifactNode `json:"node"`
		} `json:"edges"`
	} `json:"CoreArtifact"`
}

// ListArtifacts lists every artifact named name on the snapshot's branch, through GraphQL,
// a page at a time. An answer with errors, or that does not parse, is an error: never zero
// artifacts, and never a partial list. Within quota q (nil: none), a listing Infrahub
// counts over the artifacts bound is refused at its first page, and one that runs past
// the sync's deadline is a *LimitError: neither is read to its end.
func (c *Client) ListArtifacts(ctx context.Context, snap Snapshot, name string, q *Quota) ([]Artifact, error) {
	bounded, cancel := q.bound(ctx)
	defer cancel()
	var all []Artifact
	for {
		page, count, err := c.listPage(bounded, snap, name, len(all), q)
		if err == nil {
			// Infrahub's count, and what it actually sent, against the bound.
			err = q.checkListed(max(count, len(all)+len(page)))
		}
		if err != nil {
			return nil, fmt.Errorf("list artifacts %q on branch %s: %w", name, snap.Branch, q.timedOut(ctx, err, "listing"))
		}
		all = append(all, page...)
		if len(all) >= count || len(page) == 0 {
			if len(all) != count {
				return nil, fmt.Errorf("list artifacts %q on branch %s: Infrahub counts %d but returned %d", name, snap.Branch, count, len(all))
			}
			sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
			return all, nil
		}
	}
}

// pageSize is how many artifacts one GraphQL request asks for.
const pageSize = 200

// maxPageBytes caps one page of a listing: 200 artifacts take a few hundred KiB.
const maxPageBytes = 4 << 20

func (c *Client) listPage(ctx context.Context, snap Snapshot, name string, offset int, q *Quota) ([]Artifact, int, error) {
	vars := map[string]any{"names": []string{name}, "offset": offset, "limit": pageSize}
	body, err := json.Marshal(map[string]any{"query": artifactsQuery, "variables": vars})
	if err != nil {
		return nil, 0, err
	}
	read := q.listingRead(maxPageBytes)
	defer read.release() // once decoded
	req := request{method: http.MethodPost, path: "/graphql/" + url.PathEscape(snap.Branch), query: snap.query(), body: body, bounded: read}
	data, err := c.do(ctx, req, maxPageBytes)
	if err != nil {
		return nil, 0, err
	}
	return decodeArtifacts(data, name)
}

// ListArtifactsByQuery lists artifacts through the stored query queryName, given the
// variable artifactname, as the original Vidra did with its ArtifactIDs query. An
// artifact whose status the query does not return is taken as Ready, as the original did.
func (c *Client) ListArtifactsByQuery(ctx context.Context, snap Snapshot, queryName, name string, quota *Quota) ([]Artifact, error) {
	// GET, because Infrahub lets anonymous readers GET a stored query but not POST one.
	q := snap.query()
	q.Set("branch", snap.Branch)
	q.Set("artifactname", name)
	bounded, cancel := quota.bound(ctx)
	defer cancel()
	read := quota.listingRead(maxResponseBytes)
	defer read.release() // once decoded
	req := request{method: http.MethodGet, path: "/api/query/" + url.PathEscape(queryName), query: q, bounded: read}
	data, err := c.do(bounded, req, maxResponseBytes)
	if err != nil {
		return nil, fmt.Errorf("stored query %s for %q on branch %s: %w", queryName, name, snap.Branch, quota.timedOut(ctx, err, "listing"))
	}
	arts, count, err := decodeArtifacts(data, "")
	if err == nil {
		err = quota.checkListed(max(count, len(arts)))
	}
	if err == nil && count != len(arts) {
		err = fmt.Errorf("the answer counts %d artifacts but holds %d: a stored query must return them all", count, len(arts))
	}
	if err != nil {
		return nil, fmt.Errorf("stored query %s for %q on branch %s: %w", queryName, name, snap.Branch, err)
	}
	sort.Slice(arts, func(i, j int) bool { return arts[i].ID < arts[j].ID })
	for i := range arts {
		if arts[i].Status == "" {
			arts[i].Status = StatusReady
		}
	}
	return arts, nil
}

// decodeArtifacts reads {"data":{"CoreArtifact":{"count":N,"edges":[...]}}} and returns
// the artifacts and N (the number of edges when the answer has no count); errors in the
// answer, a missing CoreArtifact or a node without id make it fail. With name set, nodes
// of another name are an error too: the server did not apply the filter.
func decodeArtifacts(data []byte, name string) ([]Artifact, int, error) {
	var resp struct {
		Data   *artifactsData    `json:"data"`
		Errors []json.RawMessage `json:"errors"`
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, 0, fmt.Errorf("the answer is not JSON: %w", err)
	}
	if len(resp.Errors) > 0 {
		return nil, 0, &APIError{Status: http.StatusOK, Messages: errorMessages(data)}
	}
	if resp.Data == nil || resp.Data.CoreArtifact == nil {
		return nil, 0, errors.New("the answer has no data.CoreArtifact")
	}
	var out []Artifact
	for i, e := range resp.Data.CoreArtifact.Edges {
		n := e.Node
		if n == nil || n.ID == "" {
			return nil, 0, fmt.Errorf("artifact %d of the answer has no id", i)
		}
		a := Artifact{
			ID: n.ID, Name: n.Name.String(), Status: n.Status.String(),
			Checksum: strings.ToLower(n.Checksum.String()), ContentType: n.ContentType.String(),
		}
		if name != "" && a.Name != name {
			return nil, 0, fmt.Errorf("artifact %s is named %q, not %q as asked", a.ID, a.Name, name)
		}
		if t := n.Object.Node; t != nil {
			a.Target = Target{ID: t.ID, Label: t.DisplayLabel, Kind: t.Typename}
		}
		if d := n.Definition.Node; d != nil {
			a.Definition = d.Name.String()
		}
		out = append(out, a)
	}
	count := len(out)
	if c := resp.Data.CoreArtifact.Count; c != nil {
		count = *c
	}
	return out, count, nil
}

// Download returns the content of artifact a as of the snapshot, after checking that its
// MD5 is a's checksum; a mismatch is a *ChecksumMismatchError and the content is not
// returned. Within quota q (nil: none), content over what is left of the sync's bytes or
// than the memory budget can hold, or not read by the sync's deadline, is a *LimitError;
// the memory held for the content stays held until q's next download or Close.
func (c *Client) Download(ctx context.Context, snap Snapshot, a Artifact, q *Quota) ([]byte, error) {
	if q == nil {
		q = &Quota{}
	}
	if err := q.startDownload(); err != nil {
		return nil, fmt.Errorf("download artifact %s: %w", a.ID, err)
	}
	bounded, cancel := q.bound(ctx)
	defer cancel()
	query := snap.query()
	query.Set("branch", snap.Branch)
	read := q.downloadRead(a.ID)
	req := request{method: http.MethodGet, path: "/api/artifact/" + url.PathEscape(a.ID), query: query, bounded: read}
	data, err := c.do(bounded, req, MaxArtifactBytes)
	if err != nil {
		read.release()
		return nil, fmt.Errorf("download artifact %s: %w", a.ID, q.timedOut(ctx, err, "artifact "+a.ID))
	}
	q.count(read, len(data))
	if got := Checksum(data); got != a.Checksum {
		return nil, &ChecksumMismatchError{ID: a.ID, Want: a.Checksum, Got: got}
	}
	return data, nil
}

// Checksum is Infrahub's checksum of artifact content: its MD5, in lowercase hex.
func Checksum(content []byte) string {
	sum := md5.Sum(content) //nolint:gosec // see the import
	return hex.EncodeToString(sum[:])
}
