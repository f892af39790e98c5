package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	goyaml "go.yaml.in/yaml/v2"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// yamlDocuments reads a YAML stream one document at a time, as yaml.NewYAMLOrJSONDecoder
// does, and makes each document's object from what go-yaml parses it into, rather than
// from that value encoded as JSON and decoded again (sigs.k8s.io/yaml then utiljson): the
// same object in about half the time. Every resync of a VidraResource decodes its bundle,
// and decoding was the larger part of what an unchanged bundle's resync cost. A document
// whose parsed value holds anything the conversion cannot vouch for (jsonable) takes the
// JSON path instead.
func yamlDocuments(data []byte) func() (map[string]any, error) {
	reader := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	return func() (map[string]any, error) {
		doc, err := reader.Read()
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("not valid YAML or JSON: %w", err)
		}
		if len(doc) == 0 {
			return nil, err // io.EOF after the last document
		}
		var parsed any
		if goyaml.Unmarshal(doc, &parsed) == nil {
			if parsed == nil {
				return nil, nil
			}
			if m, ok := parsed.(map[any]any); ok {
				if obj, ok := jsonable(m); ok {
					return obj.(map[string]any), nil
				}
			}
		}
		// The JSON path, whose errors are the ones users have always been shown.
		var raw json.RawMessage
		if err := sigsyaml.Unmarshal(doc, &raw); err != nil {
			return nil, fmt.Errorf("not valid YAML or JSON: %w", err)
		}
		return objectOf(raw)
	}
}

// jsonable is v, as go-yaml parses it, made what encoding it as JSON and decoding that
// with utiljson makes of it: maps keyed by strings, integers as int64, floats of integral
// value as int64 (JSON writes them without a point). ok is false for what that round
// trip would change or refuse: keys other than strings, strings that are not UTF-8,
// integers past int64, floats that are not finite, and types go-yaml gives only to
// tagged values.
func jsonable(v any) (any, bool) {
	switch t := v.(type) {
	case nil, bool:
		return t, true
	case string:
		return t, utf8.ValidString(t)
	case int:
		return int64(t), true
	case int64:
		return t, true
	case float64:
		return jsonableFloat(t)
	case []any:
		out := make([]any, len(t))
		for i, item := range t {
			var ok bool
			if out[i], ok = jsonable(item); !ok {
				return nil, false
			}
		}
		return out, true
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, item := range t {
			key, ok := k.(string)
			if !ok || !utf8.ValidString(key) {
				return nil, false
			}
			if out[key], ok = jsonable(item); !ok {
				return nil, false
			}
		}
		return out, true
	}
	return nil, false
}

// jsonableFloat is f as JSON's round trip makes it: encoding/json writes a float of
// integral value below 1e21 as the shortest digits that read back as it, without a
// point, which utiljson reads as an int64 when they fit one. Past 2^53 those digits are
// not always f's exact value.
func jsonableFloat(f float64) (any, bool) {
	switch {
	case math.IsInf(f, 0) || math.IsNaN(f):
		return nil, false
	case f != math.Trunc(f) || math.Abs(f) >= 1e21:
		return f, true
	}
	if i, err := strconv.ParseInt(strconv.FormatFloat(f, 'f', -1, 64), 10, 64); err == nil {
		return i, true
	}
	return f, true
}
