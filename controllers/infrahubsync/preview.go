package infrahubsync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"time"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/syncs"
	"github.com/vidra-operator/vidra/internal/source/infrahub"
)

// defaultMaxBranches is how many branches an InfrahubSync previews at once when
// maxBranches is unset.
const defaultMaxBranches = 5

var _ syncs.Previewer = (*Kind)(nil)

// PreviewRefs lists the Infrahub branches an InfrahubSync's spec.previews names, its own
// targetBranch aside, each with its revision: a digest of the branch's listing, which
// changes when an artifact on it does. Only the first maxBranches in name order are
// listed, through the sync's own credentials and within its bounds.
func (k *Kind) PreviewRefs(ctx context.Context, obj syncs.Object) (map[string]string, int, error) {
	ihs, ok := obj.(*vidrav1alpha1.InfrahubSync)
	if !ok || ihs.Spec.Previews == nil {
		return nil, 0, nil
	}
	patterns := ihs.Spec.Previews.Branches
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil {
			return nil, 0, fmt.Errorf("branch pattern %q is not a glob: %w", p, err)
		}
	}
	limit := int(ihs.Spec.Previews.MaxBranches)
	if limit <= 0 {
		limit = defaultMaxBranches
	}
	c, err := k.sources().clientFor(ctx, ihs)
	if err != nil {
		return nil, 0, err
	}
	at, err := infrahub.At(ihs.Spec.Source.TargetDate, k.now())
	if err != nil {
		return nil, 0, err
	}
	branches, err := c.ListBranches(ctx)
	if err != nil {
		return nil, 0, err
	}
	refs := map[string]string{}
	for _, b := range branches {
		matches := slices.ContainsFunc(patterns, func(p string) bool { ok, _ := path.Match(p, b); return ok })
		if b == ihs.Branch() || !matches {
			continue
		}
		refs[b] = ""
		if len(refs) > limit {
			continue // counted as left out, not listed
		}
		if refs[b], err = k.listingRevision(ctx, c, ihs, infrahub.Snapshot{Branch: b, At: at}); err != nil {
			return nil, 0, err
		}
	}
	return refs, limit, nil
}

// listingRevision is the revision of the sync's artifacts on a branch: the branch, and
// a digest of every artifact's id and checksum.
func (k *Kind) listingRevision(ctx context.Context, c *infrahub.Client, ihs *vidrav1alpha1.InfrahubSync, snap infrahub.Snapshot) (string, error) {
	quota := infrahub.NewQuota(k.Limits, time.Now())
	defer quota.Close()
	listed, err := k.list(ctx, c, snap, ihs, quota)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, a := range listed { // sorted by id
		fmt.Fprintf(h, "%s\x00%s\x00%s\n", a.ID, a.Checksum, a.Status)
	}
	return snap.Branch + "@sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// Pinned is a copy of the InfrahubSync reading branch in place of its targetBranch, with
// no status: it lists and downloads as the sync would once the branch merged, and
// delivers nowhere.
func (k *Kind) Pinned(obj syncs.Object, branch string) syncs.Object {
	ihs := obj.(*vidrav1alpha1.InfrahubSync).DeepCopy()
	ihs.Spec.Source.TargetBranch = branch
	ihs.Spec.Previews = nil
	ihs.Status = vidrav1alpha1.InfrahubSyncStatus{}
	return ihs
}
