// Package openapi serves the apiserver's OpenAPI documents: /openapi/v2 (JSON and protobuf, one
// document for everything) and /openapi/v3 (an index and one document per group version, at
// ?hash= URLs that may be cached forever). The documents are built by kube-openapi's builders from
// Skiff's routes and the definitions openapi-gen generated from k8s.io/api, and are served by
// kube-openapi's handlers, so ETags, 304s, gzip and content negotiation are kube-apiserver's.
package openapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/skiff-sh/skiff/schemas"
	defs "github.com/skiff-sh/skiff/schemas/openapi"
)

// Registry holds one OpenAPI v2 fragment and one v3 document per served group version and
// serves their union. It is the seam for kinds that are not built in (custom resources): Set
// adds or replaces a group version's documents, Delete removes them, and both rebuild what is
// served at once; the built-in group versions are Set by New. The v2 fragment carries that group
// version's paths and the definitions they reference (shared ones, ObjectMeta, are identical in
// every fragment); the v3 document is complete on its own, as kube-apiserver serves it.
type Registry struct {
	mu    sync.Mutex
	v2    map[schema.GroupVersion]*spec.Swagger
	v3    map[string]bool // the gvPath keys served at /openapi/v3/<gvPath>
	title string
	ver   string

	v2svc *handler.OpenAPIService
	v3svc *handler3.OpenAPIService

	kinds []*schemas.Kind // built in, set on first use
	once  sync.Once
}

// New prepares the documents of the given kinds (schemas.Kinds()); version is the Kubernetes
// version the info block names. They are built on first use (tens of milliseconds), so an
// apiserver that no client asks for OpenAPI never pays for them.
func New(kinds []*schemas.Kind, version string) *Registry {
	r := &Registry{v2: map[schema.GroupVersion]*spec.Swagger{}, v3: map[string]bool{}, title: "Kubernetes", ver: version,
		v3svc: handler3.NewOpenAPIService(), kinds: kinds}
	r.v2svc = handler.NewOpenAPIService(&spec.Swagger{})
	return r
}

// builtIn builds and sets the built-in group versions once; the routes and definitions are
// fixed at compile time, so an error is a bug that every test would show.
func (r *Registry) builtIn() {
	r.once.Do(func() {
		byGV := map[schema.GroupVersion]*container{}
		var order []schema.GroupVersion
		for _, k := range r.kinds {
			gv := k.GVK.GroupVersion()
			c, ok := byGV[gv]
			if !ok {
				c = &container{root: "/" + gvPath(gv)}
				byGV[gv] = c
				order = append(order, gv)
			}
			c.routes = append(c.routes, kindRoutes(k)...)
		}
		metrics := &container{root: "/" + gvPath(metricsv1beta1.SchemeGroupVersion)}
		for _, k := range metricsKinds {
			metrics.routes = append(metrics.routes, metricsRoutes(k)...)
		}
		byGV[metricsv1beta1.SchemeGroupVersion] = metrics
		order = append(order, metricsv1beta1.SchemeGroupVersion)
		n := newNamer(schemas.Scheme, metricsScheme)
		for _, gv := range order {
			v2, v3, err := r.build(n, byGV[gv])
			if err != nil {
				panic(fmt.Sprintf("openapi: %s: %v", gv, err))
			}
			r.set(gv, v2, v3)
		}
	})
}

func (r *Registry) build(n *namer, c *container) (*spec.Swagger, *spec3.OpenAPI, error) {
	info := &spec.Info{InfoProps: spec.InfoProps{Title: r.title, Version: r.ver}}
	opID := func(rt common.Route) (string, []string, error) {
		return rt.OperationName(), []string{rt.(*route).tag}, nil
	}
	v2, err := builder.BuildOpenAPISpecFromRoutes([]common.RouteContainer{c}, &common.Config{
		Info: info, GetDefinitions: defs.GetOpenAPIDefinitions, GetDefinitionName: n.name,
		GetOperationIDAndTagsFromRoute: opID,
		CommonResponses:                map[int]spec.Response{http.StatusUnauthorized: {ResponseProps: spec.ResponseProps{Description: "Unauthorized"}}},
		SecurityDefinitions:            &spec.SecurityDefinitions{"BearerToken": bearer()},
		DefaultSecurity:                []map[string][]string{{"BearerToken": {}}},
	})
	if err != nil {
		return nil, nil, err
	}
	v3, err := builder3.BuildOpenAPISpecFromRoutes([]common.RouteContainer{c}, &common.OpenAPIV3Config{
		Info: info, GetDefinitions: defs.GetOpenAPIDefinitions, GetDefinitionName: n.name,
		GetOperationIDAndTagsFromRoute: opID,
		CommonResponses:                map[int]*spec3.Response{http.StatusUnauthorized: {ResponseProps: spec3.ResponseProps{Description: "Unauthorized"}}},
		SecuritySchemes: spec3.SecuritySchemes{"BearerToken": &spec3.SecurityScheme{SecuritySchemeProps: spec3.SecuritySchemeProps{
			Type: "apiKey", Name: "authorization", In: "header", Description: "Bearer Token authentication"}}},
		DefaultSecurity: []map[string][]string{{"BearerToken": {}}},
	})
	return v2, v3, err
}

func bearer() *spec.SecurityScheme {
	return &spec.SecurityScheme{SecuritySchemeProps: spec.SecuritySchemeProps{
		Type: "apiKey", Name: "authorization", In: "header", Description: "Bearer Token authentication"}}
}

// gvPath is a group version's API path and its /openapi/v3 key: "api/v1", "apis/apps/v1".
func gvPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

// Set serves v2 (paths and definitions of gv, merged into /openapi/v2) and v3 (served as
// /openapi/v3/<gvPath>) for gv, replacing what gv had. Either may be nil to leave that version
// without gv. The documents must not be modified afterwards.
func (r *Registry) Set(gv schema.GroupVersion, v2 *spec.Swagger, v3 *spec3.OpenAPI) {
	r.builtIn()
	r.set(gv, v2, v3)
}

func (r *Registry) set(gv schema.GroupVersion, v2 *spec.Swagger, v3 *spec3.OpenAPI) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v2 != nil {
		r.v2[gv] = v2
	} else {
		delete(r.v2, gv)
	}
	if v3 != nil {
		r.v3svc.UpdateGroupVersion(gvPath(gv), v3)
		r.v3[gvPath(gv)] = true
	} else if r.v3[gvPath(gv)] {
		r.v3svc.DeleteGroupVersion(gvPath(gv))
		delete(r.v3, gvPath(gv))
	}
	r.rebuildV2Locked()
}

// Delete stops serving gv in both versions.
func (r *Registry) Delete(gv schema.GroupVersion) { r.Set(gv, nil, nil) }

// rebuildV2Locked merges the fragments in a fixed order, so an unchanged set of group versions
// gives byte-identical JSON and the same ETag.
func (r *Registry) rebuildV2Locked() {
	gvs := make([]schema.GroupVersion, 0, len(r.v2))
	for gv := range r.v2 {
		gvs = append(gvs, gv)
	}
	sort.Slice(gvs, func(i, j int) bool { return gvs[i].String() < gvs[j].String() })
	out := &spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger: "2.0", Info: &spec.Info{InfoProps: spec.InfoProps{Title: r.title, Version: r.ver}},
		Paths: &spec.Paths{Paths: map[string]spec.PathItem{}}, Definitions: spec.Definitions{},
		Parameters: map[string]spec.Parameter{}, SecurityDefinitions: spec.SecurityDefinitions{"BearerToken": bearer()},
		Security: []map[string][]string{{"BearerToken": {}}},
	}}
	for _, gv := range gvs {
		f := r.v2[gv]
		if f.Paths != nil {
			for p, item := range f.Paths.Paths {
				out.Paths.Paths[p] = item
			}
		}
		for name, d := range f.Definitions {
			out.Definitions[name] = d
		}
		for name, p := range f.Parameters {
			out.Parameters[name] = p
		}
	}
	// As kube-apiserver: v2 clients do not understand defaults on $ref'd schemas.
	out.Definitions = handler.PruneDefaults(out.Definitions)
	_ = r.v2svc.UpdateSpec(out) // never fails
}

// ServeV2 serves /openapi/v2.
func (r *Registry) ServeV2() http.Handler {
	mux := http.NewServeMux()
	r.v2svc.RegisterOpenAPIVersionedService("/openapi/v2", mux)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.builtIn()
		mux.ServeHTTP(w, req)
	})
}

// ServeV3 serves /openapi/v3 and /openapi/v3/<group version>; an unknown group version is a 404.
func (r *Registry) ServeV3() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.builtIn()
		key := strings.Trim(strings.TrimPrefix(req.URL.Path, "/openapi/v3"), "/")
		if key == "" {
			r.v3svc.HandleDiscovery(w, req)
			return
		}
		if !r.hasV3(key) {
			notFound(w, key)
			return
		}
		r.v3svc.HandleGroupVersion(w, req)
	})
}

func (r *Registry) hasV3(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.v3[key]
}

func notFound(w http.ResponseWriter, key string) {
	st := apierrors.NewNotFound(schema.GroupResource{Resource: "openapi"}, key).Status()
	st.Kind, st.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_ = json.NewEncoder(w).Encode(st)
}
