package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/runtime/conditions"
)

// Health classes, as the pages color them.
const (
	healthy     = "ok"
	progressing = "progressing"
	failing     = "failed"
	unknown     = "unknown"
)

var funcs = template.FuncMap{
	"age": func(t *metav1.Time) string {
		if t == nil || t.IsZero() {
			return ""
		}
		return duration.HumanDuration(time.Since(t.Time))
	},
	"until": func(t *metav1.Time) string {
		if t == nil || t.IsZero() {
			return ""
		}
		if d := time.Until(t.Time); d > 0 {
			return "in " + duration.HumanDuration(d)
		}
		return "expired"
	},
	"short": func(s string) string {
		if len(s) > 12 {
			return s[:12]
		}
		return s
	},
}

// denied is what a view shows in place of what the caller may not read.
type denied struct{ Why string }

type clusterRow struct {
	Name, Phase, Health, Server, Version, Message, Identity string
	// Mode is Push or Pull; a pull cluster shows its agent instead of a server.
	Mode, AgentVersion string
	Heartbeat          *metav1.Time
	Labels             []string
	Expires            *metav1.Time
	Bundles, Ready     int
	// Deliver is whether the caller may deliver there (the fleet page only).
	Deliver mayDeliver
}

type fleetData struct {
	Clusters        []clusterRow
	ClustersDenied  *denied
	ResourcesDenied *denied
	// Local is whether the caller may deliver to the hub itself.
	Local mayDeliver
}

func (s *Server) fleetView(req *http.Request) (any, error) {
	ctx := req.Context()
	resources, err := s.resources(ctx)
	if err != nil {
		return nil, err
	}
	out, err := s.fleetOf(ctx, resources)
	if err != nil {
		return nil, err
	}
	out.Local = s.deliver.of(ctx, vidrav1alpha1.LocalClusterName)
	for i := range out.Clusters {
		out.Clusters[i].Deliver = s.deliver.of(ctx, out.Clusters[i].Name)
	}
	return out, nil
}

// fleetOf is the fleet view, with the VidraResources already read.
func (s *Server) fleetOf(ctx context.Context, resources []vidrav1alpha1.VidraResource) (fleetData, error) {
	var out fleetData
	if !s.kinds["vidraresources"].allowed {
		out.ResourcesDenied = &denied{s.kinds["vidraresources"].why}
	}
	if k := s.kinds["vidraclusters"]; !k.allowed {
		out.ClustersDenied = &denied{k.why}
		return out, nil
	}
	var clusters vidrav1alpha1.VidraClusterList
	if err := s.cache.List(ctx, &clusters); err != nil {
		return out, fmt.Errorf("list VidraClusters: %w", err)
	}
	for _, vc := range clusters.Items {
		row := clusterRow{Name: vc.Name, Phase: string(vc.Status.Phase), Health: clusterHealth(vc.Status.Phase), Server: vc.Status.Server,
			Version: vc.Status.KubernetesVersion, Message: vc.Status.Message}
		for k, v := range vc.Labels {
			row.Labels = append(row.Labels, k+"="+v)
		}
		slices.Sort(row.Labels)
		if id := vc.Status.Identity; id != nil {
			row.Identity, row.Expires = id.Type, id.ExpiresAt
		}
		row.Mode = string(vc.Status.Mode)
		if a := vc.Status.Agent; a != nil {
			row.AgentVersion, row.Heartbeat = a.Version, a.LastHeartbeat
		}
		for _, vr := range resources {
			if vr.Status.Cluster == vc.Name {
				row.Bundles++
				if resourceHealth(&vr) == healthy {
					row.Ready++
				}
			}
		}
		out.Clusters = append(out.Clusters, row)
	}
	slices.SortFunc(out.Clusters, func(a, b clusterRow) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

type resourceRow struct {
	Name, Cluster, Health, Ready, Message string
	// SyncKind and Sync name the sync that made it, if any; SyncID as the graph does.
	SyncKind, Sync, SyncID string
	Objects                int
}

func rowOf(vr *vidrav1alpha1.VidraResource) resourceRow {
	r := resourceRow{Name: vr.Name, Cluster: vr.Status.Cluster, Objects: len(vr.Status.ManagedResources)}
	if kind, name := vidrav1alpha1.SyncOf(vr.Labels); name != "" {
		r.SyncKind, r.Sync, r.SyncID = kind.Kind, name, kind.Ref(name)
	}
	r.Health, r.Ready, r.Message = conditionHealth(vr)
	return r
}

type bundleData struct {
	Row            resourceRow
	Resource       *vidrav1alpha1.VidraResource
	Objects        []objectRow
	Events         []eventsv1.Event
	EventsDenied   *denied
	Revisions      []revisionRow
	RevisionDenied *denied
	Denied         *denied
	Missing        bool
	// DependsOn names the syncs it waits for on its cluster; Variables, what its sync's
	// postBuild built it with (a Secret's value is not among them).
	DependsOn []string
	Variables []variableRow
}

type variableRow struct{ Name, Value string }

type objectRow struct {
	Kind, Namespace, Name, Status, Health, Message string
}

type revisionRow struct {
	Number           int64
	Source, Result   string
	Created          *metav1.Time
	Current, Pending bool
}

func (s *Server) bundleView(req *http.Request) (any, error) {
	ctx := req.Context()
	name := req.PathValue("name")
	if k := s.kinds["vidraresources"]; !k.allowed {
		return bundleData{Denied: &denied{k.why}}, nil
	}
	vr := &vidrav1alpha1.VidraResource{}
	if err := s.cache.Get(ctx, client.ObjectKey{Name: name}, vr); err != nil {
		if apierrors.IsNotFound(err) {
			return bundleData{Missing: true, Row: resourceRow{Name: name}}, nil
		}
		return nil, fmt.Errorf("get VidraResource %s: %w", name, err)
	}
	out := bundleData{Row: rowOf(vr), Resource: vr, Variables: variablesOf(vr)}
	for _, d := range vr.Spec.DependsOn {
		out.DependsOn = append(out.DependsOn, d.Kind+" "+d.Name)
	}
	for _, m := range vr.Status.ManagedResources {
		out.Objects = append(out.Objects, objectRow{Kind: m.Kind, Namespace: m.Namespace, Name: m.Name, Status: m.Status, Health: objectHealth(m.Status), Message: m.Message})
	}
	if k := s.kinds["events"]; k.allowed {
		var events eventsv1.EventList
		if err := s.client.List(ctx, &events, client.MatchingFields{"regarding.name": vr.Name}); err != nil {
			out.EventsDenied = &denied{"events: " + err.Error()}
		}
		for _, e := range events.Items {
			if e.Regarding.Kind == "VidraResource" {
				out.Events = append(out.Events, e)
			}
		}
		slices.SortFunc(out.Events, func(a, b eventsv1.Event) int { return eventTime(b).Compare(eventTime(a)) })
		if len(out.Events) > 20 {
			out.Events = out.Events[:20]
		}
	} else {
		out.EventsDenied = &denied{k.why}
	}
	if k := s.kinds["controllerrevisions"]; k.allowed {
		out.Revisions, out.RevisionDenied = s.revisions(ctx, vr)
	} else {
		out.RevisionDenied = &denied{k.why}
	}
	return out, nil
}

func eventTime(e eventsv1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.DeprecatedLastTimestamp.Time
}

// revisions are the VidraResource's ControllerRevisions, newest first.
func (s *Server) revisions(ctx context.Context, vr *vidrav1alpha1.VidraResource) ([]revisionRow, *denied) {
	var list appsv1.ControllerRevisionList
	if err := s.client.List(ctx, &list, client.InNamespace(s.opts.OperatorNamespace), client.MatchingLabels{vidrav1alpha1.RevisionOfLabel: string(vr.UID)}); err != nil {
		return nil, &denied{"revisions: " + err.Error()}
	}
	var out []revisionRow
	for _, r := range list.Items {
		out = append(out, revisionRow{Number: r.Revision, Source: r.Annotations[vidrav1alpha1.RevisionSourceAnnotation], Result: r.Annotations[vidrav1alpha1.RevisionResultAnnotation],
			Created: &r.CreationTimestamp, Current: r.Revision == vr.Status.Revision})
	}
	slices.SortFunc(out, func(a, b revisionRow) int { return int(b.Number - a.Number) })
	return out, nil
}

// resources lists the VidraResources the caller may read (none when it may not).
func (s *Server) resources(ctx context.Context) ([]vidrav1alpha1.VidraResource, error) {
	if !s.kinds["vidraresources"].allowed {
		return nil, nil
	}
	var list vidrav1alpha1.VidraResourceList
	if err := s.cache.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list VidraResources: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b vidrav1alpha1.VidraResource) int { return strings.Compare(a.Name, b.Name) })
	return list.Items, nil
}

func clusterHealth(phase vidrav1alpha1.ClusterPhase) string {
	switch phase {
	case vidrav1alpha1.ClusterEngaged:
		return healthy
	case vidrav1alpha1.ClusterUnreachable, vidrav1alpha1.ClusterRejected:
		return failing
	}
	return unknown
}

// conditionHealth reads the Ready condition for the object's current generation: its
// class, its status and its message.
func conditionHealth(obj conditions.Object) (string, string, string) {
	conds := *obj.StatusConditions()
	ready := meta.FindStatusCondition(conds, vidrav1alpha1.ConditionReady)
	switch {
	case ready == nil:
		return unknown, "Unknown", ""
	case conditions.IsReady(obj):
		return healthy, "True", ready.Message
	case meta.IsStatusConditionTrue(conds, vidrav1alpha1.ConditionStalled) || strings.Contains(ready.Reason, "Fail") || strings.Contains(ready.Reason, "Denied"):
		return failing, string(ready.Status), ready.Message
	}
	return progressing, string(ready.Status), ready.Message
}

func resourceHealth(vr *vidrav1alpha1.VidraResource) string {
	h, _, _ := conditionHealth(vr)
	return h
}

func objectHealth(status string) string {
	switch status {
	case "Current":
		return healthy
	case "InProgress":
		return progressing
	case "Failed", "Terminating":
		return failing
	}
	return unknown
}

// variablesOf reads what a VidraResource's sync built it with, by name.
func variablesOf(vr *vidrav1alpha1.VidraResource) []variableRow {
	vars := map[string]string{}
	if err := json.Unmarshal([]byte(vr.Annotations[vidrav1alpha1.BundleVariablesAnnotation]), &vars); err != nil {
		return nil
	}
	rows := make([]variableRow, 0, len(vars))
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		rows = append(rows, variableRow{Name: name, Value: vars[name]})
	}
	return rows
}
