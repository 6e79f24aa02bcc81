package apiserver

import (
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/schemas"
)

// The OpenAPI documents are deliberately small: they tell kubectl that every kind's PATCH takes
// the fieldValidation parameter, so kubectl relies on the server's strict validation instead of
// needing full schemas. They carry no request-body content, so kubectl apply computes its
// strategic merge patches from its built-in types.

func (s *Server) serveOpenAPIRoot(w http.ResponseWriter, _ *http.Request) {
	paths := map[string]any{"api/v1": map[string]string{"serverRelativeURL": "/openapi/v3/api/v1"}}
	for _, gv := range groupVersions() {
		p := apiPath(gv)
		paths[p] = map[string]string{"serverRelativeURL": "/openapi/v3/" + p}
	}
	writeJSON(w, http.StatusOK, map[string]any{"paths": paths})
}

func (s *Server) serveOpenAPIGroupVersion(w http.ResponseWriter, r *http.Request) {
	rest := strings.Trim(strings.TrimPrefix(r.URL.Path, "/openapi/v3/"), "/")
	parts := strings.Split(rest, "/")
	var gv schema.GroupVersion
	switch {
	case len(parts) == 2 && parts[0] == "api":
		gv = schema.GroupVersion{Version: parts[1]}
	case len(parts) == 3 && parts[0] == "apis":
		gv = schema.GroupVersion{Group: parts[1], Version: parts[2]}
	default:
		writeError(w, apierrors.NewNotFound(schema.GroupResource{Resource: "openapi"}, rest))
		return
	}
	paths := map[string]any{}
	for _, k := range schemas.Kinds() {
		if k.GVK.GroupVersion() != gv {
			continue
		}
		p := "/" + apiPath(gv) + "/"
		if k.Namespaced {
			p += "namespaces/{namespace}/"
		}
		p += k.Resource + "/{name}"
		paths[p] = map[string]any{"patch": map[string]any{
			"x-kubernetes-group-version-kind": map[string]string{"group": k.GVK.Group, "version": k.GVK.Version, "kind": k.GVK.Kind},
			"parameters":                      []map[string]any{{"name": "fieldValidation", "in": "query", "schema": map[string]string{"type": "string"}}},
			"responses":                       map[string]any{"200": map[string]string{"description": "OK"}},
		}}
	}
	if len(paths) == 0 {
		writeError(w, apierrors.NewNotFound(schema.GroupResource{Resource: "openapi"}, rest))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"openapi": "3.0.0",
		"info":    map[string]string{"title": "Skiff", "version": KubernetesVersion},
		"paths":   paths,
	})
}
