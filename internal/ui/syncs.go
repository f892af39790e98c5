package ui

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/runtime/tracing"
)

// syncRow is one sync, of any kind, as the syncs page shows it.
type syncRow struct {
	// Kind and Resource are its kind's; ID is "<short>/<name>", as the graph and
	// kubectl vidra name it.
	Kind, Resource, ID, Name string
	Health, Ready, Message   string
	Source                   syncSource
	// Bundles are an InfrahubSync's artifacts, or the bundle of a Git or OCI source.
	Bundles   []vidrav1alpha1.BundleStatus
	Rollout   *vidrav1alpha1.RolloutStatus
	Resources []resourceRow
	// Previews are what the refs a sync previews would do (kubectl vidra preview
	// shows each cluster's diff).
	Previews []vidrav1alpha1.RefPreview
}

// syncSource is where a sync reads from and what it read last.
type syncSource struct {
	// URL is the Infrahub API, the Git repository, the OCI repository or the Helm
	// repository.
	URL string
	// Branch is an InfrahubSync's target branch.
	Branch string
	// Chart is a HelmSync's chart.
	Chart string
	// Revision is what a sync of a Git, OCI or Helm source fetched last (main@sha1:…, a
	// chart version), and Message why it is not delivered, if it is not.
	Revision, Message string
	LastSync          *metav1.Time
}

type syncsData struct {
	Syncs []syncRow
	// Denied says which kinds of sync the caller may not read.
	Denied []denied
}

func (s *Server) syncsView(req *http.Request) (any, error) {
	resources, err := s.resources(req.Context())
	if err != nil {
		return nil, err
	}
	return s.syncsOf(req.Context(), resources)
}

// syncsOf is the syncs view, with the VidraResources already read: the syncs of every
// kind the caller may read, kind by kind (in SyncKinds order), then by name.
func (s *Server) syncsOf(ctx context.Context, resources []vidrav1alpha1.VidraResource) (syncsData, error) {
	var out syncsData
	for _, kind := range vidrav1alpha1.SyncKinds() {
		if k := s.kinds[kind.Resource]; !k.allowed {
			out.Denied = append(out.Denied, denied{k.why})
			continue
		}
		list := kind.NewList()
		if err := s.cache.List(ctx, list); err != nil {
			return out, fmt.Errorf("list %ss: %w", kind.Kind, err)
		}
		syncs := list.Syncs()
		slices.SortFunc(syncs, func(a, b vidrav1alpha1.Sync) int { return strings.Compare(a.GetName(), b.GetName()) })
		for _, sync := range syncs {
			out.Syncs = append(out.Syncs, syncRowOf(kind, sync, resources))
		}
	}
	return out, nil
}

// syncRowOf is a sync's row, with the VidraResources it made.
func syncRowOf(kind vidrav1alpha1.SyncKind, sync vidrav1alpha1.Sync, resources []vidrav1alpha1.VidraResource) syncRow {
	row := syncRow{Kind: kind.Kind, Resource: kind.Resource, ID: kind.Ref(sync.GetName()), Name: sync.GetName(),
		Source: sourceOf(sync), Bundles: sync.Bundles(), Rollout: sync.RolloutStatus()}
	row.Health, row.Ready, row.Message = conditionHealth(sync)
	row.Previews, _, _ = vidrav1alpha1.RefPreviews(sync)
	for i := range resources {
		if k, name := vidrav1alpha1.SyncOf(resources[i].Labels); k.Kind == kind.Kind && name == row.Name {
			row.Resources = append(row.Resources, rowOf(&resources[i]))
		}
	}
	return row
}

// sourceOf says where a sync reads from and what it read last.
func sourceOf(sync vidrav1alpha1.Sync) syncSource {
	out := syncSource{URL: sync.SourceURL(), LastSync: sync.LastSynced()}
	switch s := sync.(type) {
	case *vidrav1alpha1.InfrahubSync:
		out.Branch = s.Spec.Source.TargetBranch
	case *vidrav1alpha1.HelmSync:
		out.Chart = s.Spec.Source.Chart
	}
	if fetched := sync.Fetched(); fetched != nil {
		out.Revision, out.Message = fetched.Revision, fetched.Message
	}
	return out
}

// syncNow asks a sync of any kind (named by its resource and name in the path) to sync
// now, as kubectl annotate would, with the caller's credentials.
func (s *Server) syncNow(w http.ResponseWriter, req *http.Request) {
	if subtle.ConstantTimeCompare([]byte(req.FormValue("token")), []byte(s.token)) != 1 {
		http.Error(w, "this action comes from another page", http.StatusForbidden)
		return
	}
	resource, name := req.PathValue("resource"), req.PathValue("name")
	i := slices.IndexFunc(vidrav1alpha1.SyncKinds(), func(k vidrav1alpha1.SyncKind) bool { return k.Resource == resource })
	if i < 0 {
		http.Error(w, fmt.Sprintf("%s is not a kind of sync", resource), http.StatusNotFound)
		return
	}
	kind := vidrav1alpha1.SyncKinds()[i]
	sync := kind.New()
	sync.SetName(name)
	// As the webhook's: a trace context of an earlier request is not left to be joined.
	body, err := tracing.AnnotationsPatch(req.Context(), map[string]string{vidrav1alpha1.RequestedAtAnnotation: time.Now().UTC().Format(time.RFC3339Nano)})
	if err == nil {
		err = s.client.Patch(req.Context(), sync, client.RawPatch(types.MergePatchType, body))
	}
	if err != nil {
		code := http.StatusBadGateway
		var status apierrors.APIStatus
		if errors.As(err, &status) && status.Status().Code != 0 {
			code = int(status.Status().Code)
		}
		http.Error(w, fmt.Sprintf("request a sync of %s %s: %v", kind.Kind, name, err), code)
		return
	}
	// The page asked with fetch, and refreshes its view itself.
	w.WriteHeader(http.StatusNoContent)
}
