package sourcesync

import (
	"context"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/syncs"
)

// defaultMaxRefs is how many refs a GitSync previews at once when maxRefs is unset.
const defaultMaxRefs = 5

// PreviewRefs lists the refs a GitSync's spec.previews names, each with its revision, as
// the sync's own credentials see the repository.
func (k *Kind) PreviewRefs(ctx context.Context, obj syncs.Object) (map[string]string, int, error) {
	gs, ok := obj.(*vidrav1alpha1.GitSync)
	g, git := k.Source.(*Git)
	if !ok || !git || gs.Spec.Previews == nil {
		return nil, 0, nil
	}
	remote, err := g.remote(ctx, gs)
	if err != nil {
		return nil, 0, err
	}
	ctx, cancel := bounded(ctx, g.Timeout)
	defer cancel()
	refs, err := g.Cache.ListRefs(ctx, remote, gs.Spec.Previews.Refs)
	if err != nil {
		return nil, 0, gitFailure(err)
	}
	for ref, commit := range refs {
		refs[ref] = ref + "@sha1:" + commit
	}
	limit := int(gs.Spec.Previews.MaxRefs)
	if limit <= 0 {
		limit = defaultMaxRefs
	}
	return refs, limit, nil
}

// Pinned is a copy of the GitSync reading ref, with no status: it is built as the sync
// would build that ref's commit after a merge (path, decryption, variables), and
// delivered nowhere.
func (k *Kind) Pinned(obj syncs.Object, ref string) syncs.Object {
	gs := obj.(*vidrav1alpha1.GitSync).DeepCopy()
	gs.Spec.Source.Ref = &vidrav1alpha1.GitRef{Name: ref}
	gs.Spec.Previews = nil
	gs.Status = vidrav1alpha1.SourceSyncStatus{}
	return gs
}
