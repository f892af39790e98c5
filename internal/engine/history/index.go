package history

import (
	"context"
	"slices"
	"strconv"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/metawatch"
)

// numberAnnotation repeats a revision's number in its metadata, which the index watches:
// the number itself is a field of the ControllerRevision, not of its metadata.
const numberAnnotation = "vidra.infrahub.operators.com/revision"

// Index keeps the metadata of every revision in the namespace, from a watch, so that
// recording a revision lists none: the API server serves a list by label by scanning
// every revision of the namespace, and a fleet records one per VidraResource, so the
// lists grow with the square of the fleet. What the index says of a VidraResource is
// trusted once the watch has heard what this process last wrote or listed of it; until
// then, and before the watch has listed once, its revisions are listed.
type Index struct {
	watch *metawatch.Watch

	mu sync.Mutex
	// expected holds, per VidraResource, each revision as this process last wrote or
	// listed it; dropped once the watch has heard it all.
	expected map[types.UID][]version
	// unsure holds the VidraResources of which a write failed: what it did is unknown
	// until they are listed.
	unsure map[types.UID]bool
}

// NewIndex returns an index of the revisions in namespace, which Run keeps.
func NewIndex(client metadata.Interface, namespace string) *Index {
	owned, _ := labels.NewRequirement(vidrav1alpha1.RevisionOfLabel, selection.Exists, nil)
	return &Index{
		watch: metawatch.New(metawatch.Options{
			Client:     client,
			Resource:   appsv1.SchemeGroupVersion.WithResource("controllerrevisions"),
			Kind:       appsv1.SchemeGroupVersion.WithKind("ControllerRevision"),
			Namespace:  namespace,
			Selector:   labels.NewSelector().Add(*owned),
			IndexLabel: vidrav1alpha1.RevisionOfLabel,
			Keep: metawatch.Keep{
				Labels:      []string{vidrav1alpha1.RevisionOfLabel},
				Annotations: []string{vidrav1alpha1.RevisionDigestAnnotation, vidrav1alpha1.RevisionResultAnnotation, numberAnnotation},
			},
		}),
		expected: map[types.UID][]version{},
		unsure:   map[types.UID]bool{},
	}
}

// Run watches the revisions until ctx ends.
func (i *Index) Run(ctx context.Context) error {
	i.watch.Run(ctx)
	return nil
}

// HasSynced says whether the watch has listed the revisions once.
func (i *Index) HasSynced() bool {
	return i.watch.HasSynced()
}

// revisions are the VidraResource's revisions, metadata and number only (no data), and
// whether the index can say: it cannot before its first list, while it has not heard
// what this process last did, or for a revision recorded before revisions carried their
// number in their metadata.
func (i *Index) revisions(uid types.UID) ([]appsv1.ControllerRevision, bool) {
	if i == nil || !i.watch.HasSynced() {
		return nil, false
	}
	metas := i.watch.ByLabel(string(uid))
	i.mu.Lock()
	if i.unsure[uid] || !heard(i.expected[uid], metas) {
		i.mu.Unlock()
		return nil, false
	}
	delete(i.expected, uid)
	i.mu.Unlock()
	out := make([]appsv1.ControllerRevision, 0, len(metas))
	for _, m := range metas {
		number, err := strconv.ParseInt(m.Annotations[numberAnnotation], 10, 64)
		if err != nil {
			return nil, false
		}
		out = append(out, appsv1.ControllerRevision{TypeMeta: m.TypeMeta, ObjectMeta: m.ObjectMeta, Revision: number})
	}
	return out, true
}

// version is a revision's name and resourceVersion ("" for one deleted or gone).
type version struct {
	name, resourceVersion string
}

// heard says whether the watch's metadata has every revision as expected.
func heard(expected []version, metas []*metav1.PartialObjectMetadata) bool {
	for _, e := range expected {
		rv := ""
		for _, m := range metas {
			if m.Name == e.name {
				rv = m.ResourceVersion
				break
			}
		}
		if rv != e.resourceVersion {
			return false
		}
	}
	return true
}

// wrote notes what this process wrote of a revision: its resourceVersion now, or "" when
// it deleted it.
func (i *Index) wrote(uid types.UID, name, resourceVersion string) {
	if i == nil {
		return
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	for n, e := range i.expected[uid] {
		if e.name == name {
			i.expected[uid][n].resourceVersion = resourceVersion
			return
		}
	}
	i.expected[uid] = append(i.expected[uid], version{name, resourceVersion})
}

// failed notes a write of the VidraResource's revisions that failed: whether it took
// effect is unknown, so they are listed next time.
func (i *Index) failed(uid types.UID) {
	if i == nil {
		return
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.unsure[uid] = true
}

// listed notes the VidraResource's revisions as just listed: the index says nothing of
// it until the watch agrees.
func (i *Index) listed(uid types.UID, revisions []appsv1.ControllerRevision) {
	if i == nil {
		return
	}
	expected := make([]version, 0, len(revisions))
	for _, cr := range revisions {
		expected = append(expected, version{cr.Name, cr.ResourceVersion})
	}
	for _, m := range i.watch.ByLabel(string(uid)) {
		if !slices.ContainsFunc(revisions, func(cr appsv1.ControllerRevision) bool { return cr.Name == m.Name }) {
			expected = append(expected, version{m.Name, ""})
		}
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.expected[uid] = expected
	delete(i.unsure, uid)
}

// forget drops what the index expects of a VidraResource that is gone.
func (i *Index) forget(uid types.UID) {
	if i == nil {
		return
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	delete(i.expected, uid)
	delete(i.unsure, uid)
}
