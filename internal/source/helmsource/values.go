package helmsource

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// Cluster is what ClusterValues may substitute into values.
type Cluster struct {
	Name   string
	Labels map[string]string
}

// MergeValues merges layers in order, later ones winning: maps merge recursively,
// anything else (lists included) replaces. The layers are not modified.
func MergeValues(layers ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, layer := range layers {
		mergeInto(out, layer)
	}
	return out
}

func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeInto(dm, sm)
				continue
			}
			fresh := map[string]any{}
			mergeInto(fresh, sm)
			dst[k] = fresh
			continue
		}
		dst[k] = deepCopy(v)
	}
}

// deepCopy copies the maps and lists of a values tree; other values are immutable.
func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// ParseValues parses a values document (YAML or JSON) into a map. An empty document is
// an empty map; any other document that is not a map is an error.
func ParseValues(data []byte) (map[string]any, error) {
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("parse values: %w", err)
	}
	if v == nil {
		return map[string]any{}, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("values must be a map of keys to values, not a %s", kindOf(v))
	}
	return m, nil
}

func kindOf(v any) string {
	switch v.(type) {
	case []any:
		return "list"
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64, int64, int:
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

// ClusterValues returns a copy of values with ${cluster.name} and
// ${cluster.labels.<key>} replaced in every string value, however deep in maps and
// lists (keys are left as they are). "$${" is a literal "${". A label the cluster does
// not have, and any other ${…}, is an error naming it.
func ClusterValues(values map[string]any, c Cluster) (map[string]any, error) {
	out, err := substitute(values, c, "")
	if err != nil {
		return nil, err
	}
	if out == nil {
		return map[string]any{}, nil
	}
	return out.(map[string]any), nil
}

func substitute(v any, c Cluster, path string) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			return nil, nil
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			s, err := substitute(e, c, joinPath(path, k))
			if err != nil {
				return nil, err
			}
			out[k] = s
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			s, err := substitute(e, c, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	case string:
		s, err := expand(v, c)
		if err != nil {
			return nil, fmt.Errorf("values %s: %w", path, err)
		}
		return s, nil
	}
	return v, nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// expand replaces the ${…} references of s.
func expand(s string, c Cluster) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if i > 0 && s[i-1] == '$' {
			// "$${" is the escape: write "${" and go on after it.
			b.WriteString(s[:i-1] + "${")
			s = s[i+2:]
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("%q has a ${ without its closing }", s[i:])
		}
		name := s[i+2 : i+end]
		value, err := lookup(name, c)
		if err != nil {
			return "", err
		}
		b.WriteString(s[:i] + value)
		s = s[i+end+1:]
	}
}

func lookup(name string, c Cluster) (string, error) {
	if name == "cluster.name" {
		return c.Name, nil
	}
	if key, ok := strings.CutPrefix(name, "cluster.labels."); ok {
		value, ok := c.Labels[key]
		if !ok {
			return "", fmt.Errorf("${%s}: cluster %q has no label %q", name, c.Name, key)
		}
		return value, nil
	}
	return "", fmt.Errorf("${%s} is not known: use ${cluster.name} or ${cluster.labels.<key>} (or $${ for a literal ${)", name)
}
