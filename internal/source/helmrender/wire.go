package helmrender

import (
	"fmt"

	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/vidra-operator/vidra/internal/source/helmsource"
)

// request is what the parent sends a child: a chart and how to render it.
type request struct {
	Chart   wireChart                `json:"chart"`
	Options helmsource.RenderOptions `json:"options"`
}

// wireChart is a chart with its subcharts, which the chart's own JSON leaves out.
type wireChart struct {
	Chart        *chart.Chart `json:"chart"`
	Dependencies []wireChart  `json:"dependencies,omitempty"`
}

func toWire(ch *chart.Chart) wireChart {
	w := wireChart{Chart: ch}
	for _, dep := range ch.Dependencies() {
		w.Dependencies = append(w.Dependencies, toWire(dep))
	}
	return w
}

// maxNesting bounds the subcharts' depth as the child decodes them; the parent's charts
// were bounded when they were loaded (helmsource's MaxChartNesting).
const maxNesting = 64

func (w wireChart) chart(depth int) (*chart.Chart, error) {
	if w.Chart == nil {
		return nil, fmt.Errorf("no chart")
	}
	if depth > maxNesting {
		return nil, fmt.Errorf("subcharts nest deeper than %d", maxNesting)
	}
	deps := make([]*chart.Chart, 0, len(w.Dependencies))
	for _, d := range w.Dependencies {
		dep, err := d.chart(depth + 1)
		if err != nil {
			return nil, err
		}
		deps = append(deps, dep)
	}
	w.Chart.SetDependencies(deps...)
	return w.Chart, nil
}

// reply is what a child writes back: the rendering, or why there is none.
type reply struct {
	Manifest []byte   `json:"manifest,omitempty"`
	Dropped  []string `json:"dropped,omitempty"`
	// Error is the render's error; Limit is set when it was a helmsource.LimitError.
	Error string     `json:"error,omitempty"`
	Limit *wireLimit `json:"limit,omitempty"`
}

// wireLimit is a helmsource.LimitError.
type wireLimit struct {
	What  string `json:"what"`
	Limit string `json:"limit"`
	Max   int64  `json:"max"`
}
