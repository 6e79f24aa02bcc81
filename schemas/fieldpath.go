package schemas

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// encoding/json names a mistyped field by its struct path without list indices
// ("spec.containers.ports.containerPort"); these helpers find the concrete element in the
// document ("spec.containers[0].ports[1].containerPort") so errors point at one place.

// indexedPath returns the first concrete path matching dotted whose value has the JSON type
// jsonType ("string", "number", "bool", "array", "object"), or dotted itself.
func indexedPath(raw []byte, dotted, jsonType string) string {
	var doc any
	if json.Unmarshal(raw, &doc) != nil {
		return dotted
	}
	want := strings.Fields(jsonType)
	if len(want) == 0 {
		return dotted
	}
	if p, ok := walkPath(doc, strings.Split(dotted, "."), "", want[0]); ok {
		return p
	}
	return dotted
}

func walkPath(v any, segs []string, at, want string) (string, bool) {
	if arr, ok := v.([]any); ok && (len(segs) > 0 || want != "array") {
		for i, e := range arr {
			if p, ok := walkPath(e, segs, fmt.Sprintf("%s[%d]", at, i), want); ok {
				return p, true
			}
		}
		return "", false
	}
	if len(segs) == 0 {
		return at, jsonKind(v) == want
	}
	m, ok := v.(map[string]any)
	if !ok {
		return "", false
	}
	child, ok := m[segs[0]]
	if !ok {
		return "", false
	}
	return walkPath(child, segs[1:], join(at, segs[0]), want)
}

func join(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}

func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "null"
}

// quantityKeys hold maps of resource quantities or single quantities.
var quantityKeys = map[string]bool{"limits": true, "requests": true, "capacity": true, "allocatable": true}

// badQuantityPath finds the first string that should be a resource quantity but does not parse.
func badQuantityPath(raw []byte) (string, bool) {
	var doc any
	if json.Unmarshal(raw, &doc) != nil {
		return "", false
	}
	return findBadQuantity(doc, "", false)
}

func findBadQuantity(v any, at string, inQuantities bool) (string, bool) {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := join(at, k)
			if inQuantities || k == "sizeLimit" {
				if s, ok := t[k].(string); ok {
					if _, err := resource.ParseQuantity(s); err != nil {
						return p, true
					}
					continue
				}
			}
			if p, ok := findBadQuantity(t[k], p, quantityKeys[k] && !inQuantities); ok {
				return p, true
			}
		}
	case []any:
		for i, e := range t {
			if p, ok := findBadQuantity(e, fmt.Sprintf("%s[%d]", at, i), false); ok {
				return p, true
			}
		}
	}
	return "", false
}
