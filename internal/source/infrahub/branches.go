package infrahub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
)

// branchesQuery lists Infrahub's branches, as its SDK's branch listing does.
const branchesQuery = `query { Branch { name } }`

// maxBranchesBytes caps the answer to the branch listing: a thousand branches' names
// take some tens of KiB.
const maxBranchesBytes = 1 << 20

// ListBranches lists the names of Infrahub's branches, sorted. An answer with errors,
// or that does not parse, is an error: never zero branches.
func (c *Client) ListBranches(ctx context.Context) ([]string, error) {
	body, err := json.Marshal(map[string]any{"query": branchesQuery})
	if err != nil {
		return nil, err
	}
	data, err := c.do(ctx, request{method: http.MethodPost, path: "/graphql", body: body}, maxBranchesBytes)
	if err != nil {
		return nil, fmt.Errorf("list branches: %w", err)
	}
	var resp struct {
		Data *struct {
			Branch []struct {
				Name string `json:"name"`
			} `json:"Branch"`
		} `json:"data"`
		Errors []json.RawMessage `json:"errors"`
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, fmt.Errorf("list branches: the answer is not JSON: %w", err)
	}
	if len(resp.Errors) > 0 {
		return nil, fmt.Errorf("list branches: %w", &APIError{Status: http.StatusOK, Messages: errorMessages(data)})
	}
	if resp.Data == nil || resp.Data.Branch == nil {
		return nil, errors.New("list branches: the answer holds no Branch list")
	}
	names := make([]string, 0, len(resp.Data.Branch))
	for _, b := range resp.Data.Branch {
		if b.Name != "" {
			names = append(names, b.Name)
		}
	}
	sort.Strings(names)
	return names, nil
}
