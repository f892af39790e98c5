package history

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Pending is what the VidraResource's revisions numbered above the one its status says
// it delivered name: objects a reconcile recorded, and perhaps applied, before it
// stopped without writing its status.
func (h *History) Pending(ctx context.Context, vr *vidrav1alpha1.VidraResource) ([]vidrav1alpha1.ManagedResource, error) {
	revisions, err := h.revisionsOf(ctx, vr, func(cr *appsv1.ControllerRevision) bool { return cr.Revision > vr.Status.Revision })
	if err != nil {
		return nil, err
	}
	return pending(revisions, vr.Status.Revision), nil
}

func pending(revisions []appsv1.ControllerRevision, delivered int64) []vidrav1alpha1.ManagedResource {
	var out []vidrav1alpha1.ManagedResource
	for i := range revisions {
		if revisions[i].Revision > delivered {
			out = append(out, inventoryOf(&revisions[i])...)
		}
	}
	return out
}

// inventoryOf is what a revision names; nil when it names nothing or cannot be read (a
// revision recorded before revisions held inventories).
func inventoryOf(cr *appsv1.ControllerRevision) []vidrav1alpha1.ManagedResource {
	var d struct { // only the inventory: the content is not decoded
		Inventory []vidrav1alpha1.ManagedResource `json:"inventory"`
	}
	if err := json.Unmarshal(cr.Data.Raw, &d); err != nil {
		return nil
	}
	return d.Inventory
}

// List returns the VidraResource's revisions, oldest first.
func (h *History) List(ctx context.Context, vr *vidrav1alpha1.VidraResource) ([]Revision, error) {
	crs, err := h.list(ctx, vr)
	if err != nil {
		return nil, err
	}
	out := make([]Revision, 0, len(crs))
	for i := range crs {
		rev, err := decode(&crs[i])
		if err != nil {
			return nil, fmt.Errorf("revision %s: %w", crs[i].Name, err)
		}
		out = append(out, rev)
	}
	slices.SortFunc(out, func(a, b Revision) int { return int(a.Number - b.Number) })
	return out, nil
}

// Get returns revision number of the VidraResource.
func (h *History) Get(ctx context.Context, vr *vidrav1alpha1.VidraResource, number int64) (Revision, error) {
	revisions, err := h.List(ctx, vr)
	if err != nil {
		return Revision{}, err
	}
	for _, r := range revisions {
		if r.Number == number {
			return r, nil
		}
	}
	return Revision{}, fmt.Errorf("%s has no revision %d (it keeps %d: %s)", vr.Name, number, len(revisions), numbers(revisions))
}

// Previous returns the revision delivered before the newest.
func (h *History) Previous(ctx context.Context, vr *vidrav1alpha1.VidraResource) (Revision, error) {
	revisions, err := h.List(ctx, vr)
	if err != nil {
		return Revision{}, err
	}
	if len(revisions) < 2 {
		return Revision{}, fmt.Errorf("%s has no revision before the one it delivers (it keeps %s)", vr.Name, numbers(revisions))
	}
	return revisions[len(revisions)-2], nil
}

func numbers(revisions []Revision) string {
	if len(revisions) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(revisions))
	for _, r := range revisions {
		parts = append(parts, fmt.Sprint(r.Number))
	}
	return strings.Join(parts, ", ")
}

// revisionsOf are the VidraResource's revisions: as the index has them, when it can say,
// with the data of those need picks read (nil: none); else listed, with all their data.
func (h *History) revisionsOf(ctx context.Context, vr *vidrav1alpha1.VidraResource, need func(*appsv1.ControllerRevision) bool) ([]appsv1.ControllerRevision, error) {
	if revisions, ok := h.Index.revisions(vr.UID); ok {
		err := h.readData(ctx, revisions, need)
		if err == nil {
			return revisions, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		// Gone since the watch heard of it: the list says what is left.
	}
	revisions, err := h.list(ctx, vr)
	if err != nil {
		return nil, err
	}
	h.Index.listed(vr.UID, revisions)
	return revisions, nil
}

// readData reads whole the revisions need picks.
func (h *History) readData(ctx context.Context, revisions []appsv1.ControllerRevision, need func(*appsv1.ControllerRevision) bool) error {
	for i := range revisions {
		cr := &revisions[i]
		if need == nil || !need(cr) {
			continue
		}
		if err := h.Reader.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
			return fmt.Errorf("read revision %s: %w", cr.Name, err)
		}
	}
	return nil
}

func (h *History) list(ctx context.Context, vr *vidrav1alpha1.VidraResource) ([]appsv1.ControllerRevision, error) {
	var list appsv1.ControllerRevisionList
	if err := h.Reader.List(ctx, &list, client.InNamespace(h.Namespace), client.MatchingLabels{vidrav1alpha1.RevisionOfLabel: string(vr.UID)}); err != nil {
		return nil, fmt.Errorf("list revisions of %s: %w", vr.Name, err)
	}
	return list.Items, nil
}
