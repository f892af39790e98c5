package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// fleetPanel is one figure of the plot: its series against the fleet size, and its
// target as a dashed line (none when 0).
type fleetPanel struct {
	title, unit string
	series      []fleetSeries
	target      float64
}

type fleetSeries struct {
	name  string
	value func(fleetResult) float64
}

// fleetPanels are the figures bench/README.md shows against the fleet size.
func fleetPanels() []fleetPanel {
	return []fleetPanel{
		{title: "Enrollment", unit: "seconds", target: 60, series: []fleetSeries{
			{"all Engaged after the first Secret", func(f fleetResult) float64 { return f.EngageTotalSeconds }},
			{"p95 per cluster", func(f fleetResult) float64 { return f.EngageP95Ms / 1000 }},
		}},
		{title: "Delivery throughput", unit: "objects/s", series: []fleetSeries{
			{"syncs to every bundle Ready (smallest: before and after the largest)", func(f fleetResult) float64 { return bracketed(f, objectsPerSecond) }},
		}},
		{title: "Memory per idle cluster", unit: "MiB", target: 1, series: []fleetSeries{
			{"RSS, engaged", func(f fleetResult) float64 { return f.RSSPerEngagedClusterMiB }},
			{"RSS, with its bundles", func(f fleetResult) float64 { return f.RSSPerIdleClusterMiB }},
			{"heap, with its bundles", func(f fleetResult) float64 { return f.HeapPerIdleClusterMiB }},
			{"peak RSS (delivering) / clusters", func(f fleetResult) float64 { return f.PeakRSSMiB / float64(f.Clusters) }},
		}},
		{title: "Heap per managed object", unit: "KiB", target: 2, series: []fleetSeries{
			{"heap added by delivering / objects", func(f fleetResult) float64 { return f.HeapPerManagedObjectKiB }},
			{"of it, live objects", func(f fleetResult) float64 { return f.LiveHeapPerManagedObjectKiB }},
			{"after each cluster's first bundle", func(f fleetResult) float64 { return f.MarginalHeapPerManagedObjectKiB }},
			{"live, after the first bundle", func(f fleetResult) float64 { return f.MarginalLiveHeapPerManagedObjectKiB }},
			{"of it, the Events recorder's", func(f fleetResult) float64 { return f.MarginalEventsHeapPerManagedObjectKiB }},
		}},
		{title: "Idle requests per cluster", unit: "per minute", target: 2, series: []fleetSeries{
			{"to its member", func(f fleetResult) float64 { return f.IdleMemberRequestsPerClusterMin }},
			{"to the hub", func(f fleetResult) float64 { return f.IdleHubRequestsPerClusterMin }},
		}},
		{title: "Cost of delivery", unit: "per bundle / per 1000 objects", series: []fleetSeries{
			{"hub writes per bundle", func(f fleetResult) float64 { return f.HubWritesPerBundle }},
			{"operator CPU s per 1000 objects", func(f fleetResult) float64 { return f.CPUSecondsPer1000Objects }},
			{"goroutines per idle cluster", func(f fleetResult) float64 { return f.GoroutinesPerIdleCluster }},
		}},
	}
}

// plotFleet draws every panel against the fleet size into an SVG file at path.
func plotFleet(fleet []fleetResult, path string) error {
	const cols = 2
	panels := fleetPanels()
	rows := (len(panels) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	for i, panel := range panels {
		p, err := panel.plot(fleet)
		if err != nil {
			return fmt.Errorf("plot %s: %w", panel.title, err)
		}
		grid[i/cols][i%cols] = p
	}
	canvas := vgsvg.New(vg.Length(cols)*110*vg.Millimeter, vg.Length(rows)*80*vg.Millimeter)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: 6 * vg.Millimeter, PadY: 6 * vg.Millimeter,
		PadTop: 4 * vg.Millimeter, PadBottom: 4 * vg.Millimeter, PadLeft: 4 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	canvases := plot.Align(grid, tiles, draw.New(canvas))
	for i, row := range grid {
		for j, p := range row {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := canvas.WriteTo(out); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// seriesColor tells a panel's series apart.
func seriesColor(i int) color.Color {
	palette := []color.RGBA{{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, {R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}}
	return palette[i%len(palette)]
}

func (panel fleetPanel) plot(fleet []fleetResult) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = panel.title
	p.X.Label.Text = "enrolled clusters"
	p.Y.Label.Text = panel.unit
	p.Y.Min = 0
	p.Legend.Top = true
	for i, s := range panel.series {
		points := make(plotter.XYs, len(fleet))
		for j, f := range fleet {
			points[j] = plotter.XY{X: float64(f.Clusters), Y: s.value(f)}
		}
		line, dots, err := plotter.NewLinePoints(points)
		if err != nil {
			return nil, err
		}
		line.Color, dots.Color = seriesColor(i), seriesColor(i)
		p.Add(line, dots)
		p.Legend.Add(s.name, line, dots)
	}
	if panel.target > 0 {
		target, err := plotter.NewLine(plotter.XYs{{X: float64(fleet[0].Clusters), Y: panel.target}, {X: float64(fleet[len(fleet)-1].Clusters), Y: panel.target}})
		if err != nil {
			return nil, err
		}
		target.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		target.Color = color.Gray{Y: 0x80}
		p.Add(target)
		p.Legend.Add("target", target)
	}
	return p, nil
}
