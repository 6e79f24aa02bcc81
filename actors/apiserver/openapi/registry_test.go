package openapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/skiff-sh/skiff/actors/apiserver/openapi"
	"github.com/skiff-sh/skiff/schemas"
)

func serve(t *testing.T) (*openapi.Registry, *httptest.Server) {
	t.Helper()
	reg := openapi.New(schemas.Kinds(), "v1.37.2")
	mux := http.NewServeMux()
	mux.Handle("/openapi/v2", reg.ServeV2())
	mux.Handle("/openapi/v3", reg.ServeV3())
	mux.Handle("/openapi/v3/", reg.ServeV3())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return reg, srv
}

func get(t *testing.T, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	// No redirects: the ?hash= redirect is asserted as such.
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func TestV2HasSchemasKindsAndFieldValidation(t *testing.T) {
	_, srv := serve(t)
	start := time.Now()
	resp, body := get(t, srv.URL+"/openapi/v2", "Accept", "application/json")
	t.Logf("first GET /openapi/v2 (builds the documents of %d kinds): %v", len(schemas.Kinds()), time.Since(start))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /openapi/v2: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var doc spec.Swagger
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	t.Logf("/openapi/v2: %d bytes, %d paths, %d definitions", len(body), len(doc.Paths.Paths), len(doc.Definitions))
	for _, k := range schemas.Kinds() {
		name := k.New().(interface{ OpenAPIModelName() string }).OpenAPIModelName()
		d, ok := doc.Definitions[name]
		if !ok {
			t.Fatalf("no definition %s for %s", name, k.GVK)
		}
		gvks, _ := d.Extensions["x-kubernetes-group-version-kind"].([]any)
		if len(gvks) != 1 || gvks[0].(map[string]any)["kind"] != k.GVK.Kind || gvks[0].(map[string]any)["group"] != k.GVK.Group {
			t.Errorf("%s: x-kubernetes-group-version-kind = %v", name, d.Extensions["x-kubernetes-group-version-kind"])
		}
	}
	strategy := doc.Definitions["io.k8s.api.apps.v1.DeploymentSpec"].Properties["strategy"]
	if strategy.Ref.String() != "#/definitions/io.k8s.api.apps.v1.DeploymentStrategy" {
		t.Errorf("DeploymentSpec.strategy = %+v", strategy)
	}
	patch := doc.Paths.Paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"].Patch
	if patch == nil || patch.ID != "patchAppsV1NamespacedDeployment" {
		t.Fatalf("no patch operation for deployments: %+v", patch)
	}
	if !hasParam(doc.Parameters, patch.Parameters, "fieldValidation") {
		t.Errorf("patchAppsV1NamespacedDeployment lacks fieldValidation: %+v", patch.Parameters)
	}
	if got := patch.Extensions["x-kubernetes-action"]; got != "patch" {
		t.Errorf("x-kubernetes-action = %v", got)
	}
	if doc.Paths.Paths["/api/v1/pods"].Get == nil || doc.Paths.Paths["/api/v1/namespaces/{namespace}/pods/{name}/log"].Get == nil {
		t.Errorf("list of pods in all namespaces or pods/log missing")
	}
}

func hasParam(shared map[string]spec.Parameter, params []spec.Parameter, name string) bool {
	for _, p := range params {
		if ref := p.Ref.String(); ref != "" {
			p = shared[strings.TrimPrefix(ref, "#/parameters/")]
		}
		if p.Name == name && p.In == "query" {
			return true
		}
	}
	return false
}

func TestV2ProtobufAndETag(t *testing.T) {
	_, srv := serve(t)
	// kubectl's Accept header.
	resp, body := get(t, srv.URL+"/openapi/v2", "Accept", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/com.github.proto-openapi.spec.v2.v1.0+protobuf" {
		t.Fatalf("protobuf: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var doc openapi_v2.Document
	if err := proto.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range doc.GetDefinitions().GetAdditionalProperties() {
		found = found || d.Name == "io.k8s.api.core.v1.PodSpec"
	}
	if !found {
		t.Fatal("protobuf document lacks io.k8s.api.core.v1.PodSpec")
	}
	etag := resp.Header.Get("Etag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	resp, _ = get(t, srv.URL+"/openapi/v2", "Accept", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf", "If-None-Match", etag)
	if resp.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match with the current ETag: %d, want 304", resp.StatusCode)
	}
	resp, _ = get(t, srv.URL+"/openapi/v2", "Accept", "text/html")
	if resp.StatusCode != http.StatusNotAcceptable {
		t.Fatalf("Accept text/html: %d, want 406", resp.StatusCode)
	}
}

type index struct {
	Paths map[string]struct {
		ServerRelativeURL string `json:"serverRelativeURL"`
	} `json:"paths"`
}

func v3Index(t *testing.T, url string) index {
	t.Helper()
	resp, body := get(t, url+"/openapi/v3")
	var ix index
	if resp.StatusCode != 200 || json.Unmarshal(body, &ix) != nil {
		t.Fatalf("GET /openapi/v3: %d %s", resp.StatusCode, body)
	}
	return ix
}

func TestV3IndexHashAndGroupVersion(t *testing.T) {
	_, srv := serve(t)
	ix := v3Index(t, srv.URL)
	apps, ok := ix.Paths["apis/apps/v1"]
	if !ok || !strings.HasPrefix(apps.ServerRelativeURL, "/openapi/v3/apis/apps/v1?hash=") {
		t.Fatalf("index: %+v", ix)
	}
	for _, gv := range []string{"api/v1", "apis/rbac.authorization.k8s.io/v1", "apis/coordination.k8s.io/v1", "apis/discovery.k8s.io/v1"} {
		if _, ok := ix.Paths[gv]; !ok {
			t.Errorf("index lacks %s", gv)
		}
	}
	resp, body := get(t, srv.URL+apps.ServerRelativeURL)
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Cache-Control"), "immutable") {
		t.Fatalf("hashed GET: %d %q", resp.StatusCode, resp.Header.Get("Cache-Control"))
	}
	var doc spec3.OpenAPI
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	d := doc.Components.Schemas["io.k8s.api.apps.v1.Deployment"]
	if d == nil || d.Extensions["x-kubernetes-group-version-kind"] == nil {
		t.Fatalf("v3 apps/v1 lacks Deployment with its GVK: %+v", d)
	}
	if _, ok := doc.Components.Schemas["io.k8s.api.core.v1.Pod"]; ok {
		t.Errorf("apps/v1 document carries core/v1 Pod, which apps/v1 does not reference")
	}
	patch := doc.Paths.Paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"].Patch
	found := false
	for _, p := range patch.Parameters {
		found = found || (p.Name == "fieldValidation" && p.In == "query")
	}
	if !found {
		t.Errorf("v3 patch of deployments lacks fieldValidation")
	}
	// A stale hash redirects to the current one, as kube-apiserver does.
	resp, _ = get(t, srv.URL+"/openapi/v3/apis/apps/v1?hash=0000")
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != apps.ServerRelativeURL {
		t.Fatalf("stale hash: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, _ = get(t, srv.URL+"/openapi/v3/apis/nope.example.com/v1")
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown group version: %d, want 404", resp.StatusCode)
	}
}

// TestSetAndDelete is the seam custom resources use: a group version's documents appear in
// both versions at once and go away again, and the built-in ones are untouched.
func TestSetAndDelete(t *testing.T) {
	reg, srv := serve(t)
	gv := schema.GroupVersion{Group: "example.com", Version: "v1"}
	widget := spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}, Description: "A widget."},
		VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{"x-kubernetes-group-version-kind": []any{
			map[string]any{"group": "example.com", "version": "v1", "kind": "Widget"}}}}}
	v2 := &spec.Swagger{SwaggerProps: spec.SwaggerProps{Definitions: spec.Definitions{"com.example.v1.Widget": widget},
		Paths: &spec.Paths{Paths: map[string]spec.PathItem{"/apis/example.com/v1/widgets": {}}}}}
	v3 := &spec3.OpenAPI{Version: "3.0.0", Components: &spec3.Components{Schemas: map[string]*spec.Schema{"com.example.v1.Widget": &widget}}}

	_, before := get(t, srv.URL+"/openapi/v2", "Accept", "application/json")
	reg.Set(gv, v2, v3)
	if _, ok := v3Index(t, srv.URL).Paths["apis/example.com/v1"]; !ok {
		t.Fatal("Set: the v3 index lacks apis/example.com/v1")
	}
	resp, body := get(t, srv.URL+"/openapi/v3/apis/example.com/v1")
	if resp.StatusCode != 200 || !strings.Contains(string(body), "A widget.") {
		t.Fatalf("Set: v3 document: %d %s", resp.StatusCode, body)
	}
	_, body = get(t, srv.URL+"/openapi/v2", "Accept", "application/json")
	if !strings.Contains(string(body), `"com.example.v1.Widget"`) || !strings.Contains(string(body), `"io.k8s.api.apps.v1.Deployment"`) {
		t.Fatal("Set: /openapi/v2 lacks the widget or lost the built-in definitions")
	}
	reg.Delete(gv)
	if _, ok := v3Index(t, srv.URL).Paths["apis/example.com/v1"]; ok {
		t.Fatal("Delete: the v3 index still has apis/example.com/v1")
	}
	if resp, _ := get(t, srv.URL+"/openapi/v3/apis/example.com/v1"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("Delete: v3 document: %d, want 404", resp.StatusCode)
	}
	_, after := get(t, srv.URL+"/openapi/v2", "Accept", "application/json")
	if string(after) != string(before) {
		t.Fatal("Delete: /openapi/v2 differs from before Set")
	}
}

// metrics.k8s.io/v1beta1 is described as kube-apiserver describes metrics-server's API: get and
// list of NodeMetrics and PodMetrics (kube's operation ids), nothing that writes, in both versions.
func TestResourceMetricsAreDescribed(t *testing.T) {
	_, srv := serve(t)
	_, body := get(t, srv.URL+"/openapi/v2", "Accept", "application/json")
	var doc spec.Swagger
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	for path, op := range map[string]string{
		"/apis/metrics.k8s.io/v1beta1/nodes":                              "listMetricsV1beta1NodeMetrics",
		"/apis/metrics.k8s.io/v1beta1/nodes/{name}":                       "readMetricsV1beta1NodeMetrics",
		"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods":        "listMetricsV1beta1NamespacedPodMetrics",
		"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods/{name}": "readMetricsV1beta1NamespacedPodMetrics",
		"/apis/metrics.k8s.io/v1beta1/pods":                               "listMetricsV1beta1PodMetricsForAllNamespaces",
	} {
		item, ok := doc.Paths.Paths[path]
		if !ok || item.Get == nil || item.Get.ID != op {
			t.Errorf("%s: GET %+v, want %s", path, item.Get, op)
			continue
		}
		if item.Post != nil || item.Put != nil || item.Patch != nil || item.Delete != nil {
			t.Errorf("%s offers a write", path)
		}
	}
	for _, kind := range []string{"NodeMetrics", "PodMetrics", "NodeMetricsList", "PodMetricsList"} {
		d, ok := doc.Definitions["io.k8s.metrics.pkg.apis.metrics.v1beta1."+kind]
		gvks, _ := d.Extensions["x-kubernetes-group-version-kind"].([]any)
		if !ok || len(gvks) != 1 || gvks[0].(map[string]any)["group"] != "metrics.k8s.io" || gvks[0].(map[string]any)["kind"] != kind {
			t.Errorf("definition of %s: %v %v", kind, ok, d.Extensions)
		}
	}
	if gvks, _ := doc.Definitions["io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"].Extensions["x-kubernetes-group-version-kind"].([]any); strings.Contains(fmt.Sprint(gvks), "metrics.k8s.io") {
		t.Errorf("DeleteOptions is named a kind of metrics.k8s.io, which takes no deletes: %v", gvks)
	}
	resp, body := get(t, srv.URL+"/openapi/v3/apis/metrics.k8s.io/v1beta1")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"io.k8s.metrics.pkg.apis.metrics.v1beta1.PodMetrics"`) {
		t.Fatalf("/openapi/v3 of metrics.k8s.io: %d %.200s", resp.StatusCode, body)
	}
}
