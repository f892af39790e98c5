package ui

import (
	"fmt"
	"net/http"
	"slices"
)

// graphNode is one box of the dependency graph.
type graphNode struct {
	ID, Label, Kind, Health, Link string
	X, Y                          int
}

type graphEdge struct{ X1, Y1, X2, Y2 int }

type graphData struct {
	Nodes         []graphNode
	Edges         []graphEdge
	Width, Height int
	Denied        []denied
}

// Layout of the graph: four columns, syncs (of every kind) → VidraResources → clusters,
// and each VidraResource's objects beside it.
const (
	columnWidth  = 260
	rowHeight    = 34
	boxWidth     = 220
	boxHeight    = 24
	maxObjects   = 12 // per VidraResource; the bundle's page lists them all
	graphPadding = 20
)

func (s *Server) graphView(req *http.Request) (any, error) {
	ctx := req.Context()
	var out graphData
	for _, name := range []string{"vidraresources", "vidraclusters"} {
		if k := s.kinds[name]; !k.allowed {
			out.Denied = append(out.Denied, denied{k.why})
		}
	}
	// One read of the VidraResources serves the three columns that show them.
	resources, err := s.resources(ctx)
	if err != nil {
		return nil, err
	}
	syncs, err := s.syncsOf(ctx, resources)
	if err != nil {
		return nil, err
	}
	out.Denied = append(syncs.Denied, out.Denied...)
	fleet, err := s.fleetOf(ctx, resources)
	if err != nil {
		return nil, err
	}
	rows := [4]int{}
	place := func(col int, n graphNode) graphNode {
		n.X = graphPadding + col*columnWidth
		n.Y = graphPadding + rows[col]*rowHeight
		rows[col]++
		out.Nodes = append(out.Nodes, n)
		return n
	}
	connect := func(a, b graphNode) {
		out.Edges = append(out.Edges, graphEdge{a.X + boxWidth, a.Y + boxHeight/2, b.X, b.Y + boxHeight/2})
	}
	byID := map[string]graphNode{}
	for _, row := range syncs.Syncs {
		byID[row.ID] = place(0, graphNode{ID: row.ID, Label: row.ID, Kind: row.Kind, Health: row.Health, Link: "/syncs"})
	}
	for _, row := range fleet.Clusters {
		byID["vc/"+row.Name] = place(2, graphNode{ID: "vc/" + row.Name, Label: row.Name, Kind: "cluster", Health: row.Health, Link: "/"})
	}
	for i := range resources {
		vr := &resources[i]
		r := rowOf(vr)
		n := place(1, graphNode{ID: "vr/" + vr.Name, Label: vr.Name, Kind: "VidraResource", Health: r.Health, Link: "/bundles/" + vr.Name})
		if sync, ok := byID[r.SyncID]; ok && r.SyncID != "" {
			connect(sync, n)
		}
		from := n // the objects hang off their cluster, else off the VidraResource
		if cluster, ok := byID["vc/"+r.Cluster]; ok {
			connect(n, cluster)
			from = cluster
		}
		for j, m := range vr.Status.ManagedResources {
			if j == maxObjects {
				connect(from, place(3, graphNode{Label: fmt.Sprintf("… %d more", len(vr.Status.ManagedResources)-maxObjects), Kind: "object", Health: unknown, Link: "/bundles/" + vr.Name}))
				break
			}
			label := m.Kind + " " + m.Name
			if m.Namespace != "" {
				label = m.Kind + " " + m.Namespace + "/" + m.Name
			}
			o := place(3, graphNode{ID: "obj/" + vr.Name + "/" + label, Label: label, Kind: "object", Health: objectHealth(m.Status), Link: "/bundles/" + vr.Name})
			connect(from, o)
		}
	}
	out.Width = graphPadding*2 + 3*columnWidth + boxWidth
	out.Height = graphPadding*2 + slices.Max(rows[:])*rowHeight
	return out, nil
}
