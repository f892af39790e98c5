package helmsource

import (
	"encoding/json"
	"fmt"
	"strings"

	chart "helm.sh/helm/v4/pkg/chart/v2"
)

// checkSchemas refuses a values.schema.json (of the chart or a subchart) that refers to
// anything outside itself. Helm's validator loads such references from file:// and
// http(s):// URLs: from the operator, that would read its own files or reach any
// address a chart names.
func checkSchemas(c *chart.Chart) error {
	if len(c.Schema) > 0 {
		var doc any
		if err := json.Unmarshal(c.Schema, &doc); err != nil {
			return fmt.Errorf("%s: values.schema.json is not JSON: %w", c.ChartFullPath(), err)
		}
		if err := checkRefs(doc); err != nil {
			return fmt.Errorf("%s: values.schema.json: %w", c.ChartFullPath(), err)
		}
	}
	for _, d := range c.Dependencies() {
		if err := checkSchemas(d); err != nil {
			return err
		}
	}
	return nil
}

func checkRefs(v any) error {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			s, isString := e.(string)
			switch {
			case !isString:
			case k == "$ref" || k == "$dynamicRef" || k == "$recursiveRef":
				if !strings.HasPrefix(s, "#") {
					return fmt.Errorf("%s %q refers outside the schema, which is not loaded", k, s)
				}
			case k == "$schema":
				if !knownDraft(s) {
					return fmt.Errorf("$schema %q is not a JSON Schema draft known offline", s)
				}
			}
			if err := checkRefs(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := checkRefs(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// knownDraft reports a $schema the validator knows without loading it.
func knownDraft(s string) bool {
	s = strings.TrimSuffix(s, "#")
	if rest, ok := strings.CutPrefix(s, "http://"); ok {
		s = rest
	} else {
		s = strings.TrimPrefix(s, "https://")
	}
	switch s {
	case "json-schema.org/schema", "json-schema.org/draft/2020-12/schema", "json-schema.org/draft/2019-09/schema",
		"json-schema.org/draft-07/schema", "json-schema.org/draft-06/schema", "json-schema.org/draft-04/schema":
		return true
	}
	return false
}
