package openapi

import (
	"reflect"
	"sort"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// gvkExtension is the extension kubectl (explain, validation, apply's patch computation) looks up
// definitions by.
const gvkExtension = "x-kubernetes-group-version-kind"

type gvkJSON struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

// namer tags each definition with the group-version-kinds the scheme knows its type as, like
// kube-apiserver's DefinitionNamer: DeleteOptions is a kind in every group, Deployment in apps/v1.
type namer struct {
	gvks map[string][]gvkJSON // by OpenAPI model name
}

type modelNamer interface{ OpenAPIModelName() string }

func newNamer(schemes ...*runtime.Scheme) *namer {
	n := &namer{gvks: map[string][]gvkJSON{}}
	for _, scheme := range schemes {
		for gvk, t := range scheme.AllKnownTypes() {
			if gvk.Version == runtime.APIVersionInternal {
				continue
			}
			m, ok := reflect.New(t).Interface().(modelNamer)
			if !ok {
				continue
			}
			name := m.OpenAPIModelName()
			n.gvks[name] = append(n.gvks[name], gvkJSON{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind})
		}
	}
	for _, list := range n.gvks {
		sort.Slice(list, func(i, j int) bool {
			a, b := list[i], list[j]
			if a.Group != b.Group {
				return a.Group < b.Group
			}
			if a.Version != b.Version {
				return a.Version < b.Version
			}
			return a.Kind < b.Kind
		})
	}
	return n
}

// name keeps the model name (k8s.io/api's are already "io.k8s.api.apps.v1.Deployment") and adds
// the kinds it is served as.
func (n *namer) name(model string) (string, spec.Extensions) {
	list, ok := n.gvks[model]
	if !ok {
		return model, nil
	}
	v := make([]any, len(list))
	for i, g := range list {
		v[i] = map[string]any{"group": g.Group, "version": g.Version, "kind": g.Kind}
	}
	return model, spec.Extensions{gvkExtension: v}
}
