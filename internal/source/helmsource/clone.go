package helmsource

import (
	chart "helm.sh/helm/v4/pkg/chart/v2"
)

// cloneChart copies what rendering changes in a chart tree (metadata, dependency lists
// and values), sharing the files, which it only reads.
func cloneChart(c *chart.Chart) *chart.Chart {
	out := *c
	if c.Metadata != nil {
		md := *c.Metadata
		if md.Dependencies != nil {
			md.Dependencies = make([]*chart.Dependency, len(c.Metadata.Dependencies))
			for i, d := range c.Metadata.Dependencies {
				if d != nil {
					dep := *d
					md.Dependencies[i] = &dep
				}
			}
		}
		out.Metadata = &md
	}
	if c.Values != nil {
		out.Values, _ = deepCopy(c.Values).(map[string]any)
	}
	deps := make([]*chart.Chart, 0, len(c.Dependencies()))
	for _, d := range c.Dependencies() {
		deps = append(deps, cloneChart(d))
	}
	// SetDependencies makes out the parent of the copies.
	out.SetDependencies(deps...)
	return &out
}
