package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// subject is what NAME names: a VidraResource, or a sync (of any kind) and its
// VidraResources.
type subject struct {
	vr   *vidrav1alpha1.VidraResource
	sync vidrav1alpha1.Sync
	// resources are the sync's VidraResources, by name.
	resources []vidrav1alpha1.VidraResource
}

// reference is what a NAME argument may name, in the order it is looked up.
type reference struct {
	name string
	// vidraResource: NAME may be a VidraResource (looked up first).
	vidraResource bool
	// syncKinds: the kinds of sync NAME may be, in SyncKinds order.
	syncKinds []vidrav1alpha1.SyncKind
}

// parseReference reads "KIND/NAME" or a bare NAME. KIND is vidraresource (vr), or a sync
// kind by its kind, resource or short name (infrahubsync, infrahubsyncs, ihs; gitsync, gs;
// ocisync, ocis; helmsync, hs); a bare NAME may be a VidraResource, then each kind of sync. Commands that
// act on syncs only pass syncsOnly.
func parseReference(arg string, syncsOnly bool) (reference, error) {
	prefix, name, found := strings.Cut(arg, "/")
	if !found {
		prefix, name = "", arg
	}
	if name == "" || strings.Contains(name, "/") {
		return reference{}, fmt.Errorf("%q: %s", arg, namingHint(syncsOnly))
	}
	ref := reference{name: name}
	switch prefix = strings.ToLower(prefix); prefix {
	case "":
		ref.vidraResource, ref.syncKinds = !syncsOnly, vidrav1alpha1.SyncKinds()
		return ref, nil
	case "vidraresource", "vidraresources", "vr":
		if !syncsOnly {
			ref.vidraResource = true
			return ref, nil
		}
	default:
		for _, k := range vidrav1alpha1.SyncKinds() {
			if prefix == strings.ToLower(k.Kind) || prefix == k.Resource || prefix == k.Short {
				ref.syncKinds = []vidrav1alpha1.SyncKind{k}
				return ref, nil
			}
		}
	}
	return reference{}, fmt.Errorf("%q: %s", arg, namingHint(syncsOnly))
}

// namingHint says how to name what a command takes.
func namingHint(syncsOnly bool) string {
	var forms []string
	for _, k := range vidrav1alpha1.SyncKinds() {
		forms = append(forms, fmt.Sprintf("%s (%s/NAME)", k.Kind, k.Short))
	}
	syncs := "a sync: " + strings.Join(forms, ", ")
	if syncsOnly {
		return "name " + syncs
	}
	return "name a VidraResource (vr/NAME) or " + syncs
}

// kindNames lists what a bare name was looked up as, for "no ... is named".
func (r reference) kindNames() string {
	var names []string
	if r.vidraResource {
		names = append(names, "VidraResource")
	}
	for _, k := range r.syncKinds {
		names = append(names, k.Kind)
	}
	return strings.Join(names, ", ")
}

// resolve finds what NAME names; see parseReference.
func resolve(ctx context.Context, hub client.Client, arg string) (*subject, error) {
	ref, err := parseReference(arg, false)
	if err != nil {
		return nil, err
	}
	return ref.resolve(ctx, hub)
}

// resolveSync finds the sync NAME names: KIND/NAME, or a bare NAME of any kind.
func resolveSync(ctx context.Context, hub client.Client, arg string) (*subject, error) {
	ref, err := parseReference(arg, true)
	if err != nil {
		return nil, err
	}
	return ref.resolve(ctx, hub)
}

func (r reference) resolve(ctx context.Context, hub client.Client) (*subject, error) {
	// A kind named explicitly reports any error; a bare name goes on to the next kind
	// when this one has no such object, or when the hub does not serve this kind of sync
	// (a hub of an older Vidra has no GitSync).
	explicit := len(r.syncKinds) == 0 || (!r.vidraResource && len(r.syncKinds) == 1)
	if r.vidraResource {
		vr := &vidrav1alpha1.VidraResource{}
		err := hub.Get(ctx, client.ObjectKey{Name: r.name}, vr)
		if err == nil {
			return &subject{vr: vr}, nil
		}
		if explicit || !apierrors.IsNotFound(err) {
			return nil, hubError(err, "get VidraResource "+r.name)
		}
	}
	for _, kind := range r.syncKinds {
		sync := kind.New()
		err := hub.Get(ctx, client.ObjectKey{Name: r.name}, sync)
		if err == nil {
			return syncSubject(ctx, hub, kind, sync)
		}
		if explicit || (!apierrors.IsNotFound(err) && !meta.IsNoMatchError(err)) {
			return nil, hubError(err, fmt.Sprintf("get %s %s", kind.Kind, r.name))
		}
	}
	return nil, fmt.Errorf("no %s is named %s", r.kindNames(), r.name)
}

// syncSubject is the sync with the VidraResources it made: those with its label that it
// controls.
func syncSubject(ctx context.Context, hub client.Client, kind vidrav1alpha1.SyncKind, sync vidrav1alpha1.Sync) (*subject, error) {
	var list vidrav1alpha1.VidraResourceList
	if err := hub.List(ctx, &list, client.MatchingLabels{kind.Label: sync.GetName()}); err != nil {
		return nil, hubError(err, fmt.Sprintf("list the VidraResources of %s %s", kind.Kind, sync.GetName()))
	}
	s := &subject{sync: sync}
	for _, vr := range list.Items {
		if metav1.IsControlledBy(&vr, sync) {
			s.resources = append(s.resources, vr)
		}
	}
	slices.SortFunc(s.resources, func(a, b vidrav1alpha1.VidraResource) int { return strings.Compare(a.Name, b.Name) })
	return s, nil
}

// syncTitle names a sync in messages: "GitSync web".
func syncTitle(s vidrav1alpha1.Sync) string {
	return s.SyncKind().Kind + " " + s.GetName()
}
