package postbuild

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Cluster is what the per-cluster variables are read from.
type Cluster struct {
	Name   string
	Labels map[string]string
}

// Refs are the per-cluster variables a bundle names: whether ${cluster.name}, and which
// labels. Only these make one cluster's bundle differ from another's.
type Refs struct {
	Name   bool
	Labels []string // sorted, each once
}

// Key says what of c the bundle is built from: equal keys (with equal variables) build
// equal bundles, so clusters that differ only in what the bundle does not name share one.
func (r Refs) Key(c Cluster) string {
	var b strings.Builder
	if r.Name {
		fmt.Fprintf(&b, "name=%q;", c.Name)
	}
	for _, key := range r.Labels {
		if v, ok := c.Labels[key]; ok {
			fmt.Fprintf(&b, "label %q=%q;", key, v)
		} else {
			fmt.Fprintf(&b, "label %q absent;", key)
		}
	}
	return b.String()
}

func (r *Refs) add(o Refs) {
	r.Name = r.Name || o.Name
	for _, key := range o.Labels {
		if !slices.Contains(r.Labels, key) {
			r.Labels = append(r.Labels, key)
		}
	}
	slices.Sort(r.Labels)
}

// The names ${cluster.name} and ${cluster.labels.KEY} take once rewritten for envsubst,
// whose names are letters, digits and underscores: a label's key is hex-encoded. No
// variable of a sync begins with "__vidra_" (ValidName).
const (
	clusterNameVar   = "__vidra_cluster_name"
	clusterLabelVar  = "__vidra_cluster_label_"
	reservedPrefix   = "__vidra_"
	clusterRefPrefix = "${cluster."
)

// rewrite returns text with each ${cluster.name} and ${cluster.labels.KEY} (not escaped
// by $${) renamed for envsubst, and which of them it names. Any other ${cluster.…} is an
// error naming it.
func rewrite(text string) (string, Refs, error) {
	var refs Refs
	var b strings.Builder
	for {
		i := strings.Index(text, clusterRefPrefix)
		if i < 0 {
			b.WriteString(text)
			return b.String(), refs, nil
		}
		b.WriteString(text[:i])
		rest := text[i+len(clusterRefPrefix):]
		if escaped(text[:i]) {
			b.WriteString(clusterRefPrefix)
			text = rest
			continue
		}
		name, after, err := clusterVariable(rest, &refs)
		if err != nil {
			return "", Refs{}, err
		}
		b.WriteString("${" + name)
		text = after
	}
}

// escaped says whether the "$" that text is followed by is escaped: "$$" is a literal
// "$", so an odd number of "$" before it makes it one.
func escaped(before string) bool {
	n := len(before) - len(strings.TrimRight(before, "$"))
	return n%2 == 1
}

// clusterVariable reads the variable of ${cluster.<rest>: its envsubst name and what
// follows it (a default or the closing brace), and records it in refs.
func clusterVariable(rest string, refs *Refs) (name, after string, err error) {
	if after, ok := strings.CutPrefix(rest, "name"); ok && !isNameByte(after) {
		refs.Name = true
		return clusterNameVar, after, nil
	}
	if after, ok := strings.CutPrefix(rest, "labels."); ok {
		end := 0
		for end < len(after) && isLabelKeyByte(after[end]) {
			end++
		}
		if end > 0 {
			key := after[:end]
			refs.add(Refs{Labels: []string{key}})
			return clusterLabelVar + hex.EncodeToString([]byte(key)), after[end:], nil
		}
	}
	shown := rest
	if end := strings.IndexAny(shown, "}\n"); end >= 0 {
		shown = shown[:end]
	}
	return "", "", fmt.Errorf("${cluster.%s} is not known: use ${cluster.name} or ${cluster.labels.KEY} (or $${ for a literal ${)", shown)
}

func isNameByte(s string) bool {
	return s != "" && (s[0] == '_' || s[0] == '.' || isAlnum(s[0]))
}

func isLabelKeyByte(c byte) bool {
	return isAlnum(c) || c == '.' || c == '-' || c == '_' || c == '/'
}

func isAlnum(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// clusterValue is the value of a rewritten per-cluster variable, and the ${…} it was
// written as; ok is false when name is not one, or the cluster lacks the label.
func clusterValue(name string, c Cluster) (value, written string, isCluster, ok bool) {
	if name == clusterNameVar {
		return c.Name, "${cluster.name}", true, true
	}
	encoded, found := strings.CutPrefix(name, clusterLabelVar)
	if !found {
		return "", "", false, false
	}
	key, err := hex.DecodeString(encoded)
	if err != nil {
		return "", "", true, false
	}
	value, ok = c.Labels[string(key)]
	return value, "${cluster.labels." + string(key) + "}", true, ok
}
