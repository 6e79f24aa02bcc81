package apiserver_test

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// client-go (and so kubectl) asks /api and /apis for aggregated discovery first: the answer
// is that format, it lists exactly what the per-group-version documents list (a CRD's group
// included), and a cached copy revalidates by ETag.
func TestAggregatedDiscoveryMatchesLegacy(t *testing.T) {
	a, cp := newAPI(t)
	createWidgetCRD(t, a)

	for _, path := range []string{"/api", "/apis"} {
		req, _ := http.NewRequest("GET", a.base+path, nil)
		req.Header.Set("Accept", discovery.AcceptV2+","+discovery.AcceptV1)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if ok, _ := discovery.ContentTypeIsGVK(resp.Header.Get("Content-Type"), aggregatedGVK); !ok {
			t.Fatalf("%s answered %q, want the aggregated format", path, resp.Header.Get("Content-Type"))
		}
		etag := resp.Header.Get("ETag")
		req.Header.Set("If-None-Match", etag)
		again, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		again.Body.Close()
		if etag == "" || again.StatusCode != http.StatusNotModified {
			t.Errorf("%s with If-None-Match %q: HTTP %d, want 304", path, etag, again.StatusCode)
		}
	}

	aggregated := discoveredResources(t, &rest.Config{Host: cp.URL()}, false)
	legacy := discoveredResources(t, &rest.Config{Host: cp.URL()}, true)
	if strings.Join(aggregated, "\n") != strings.Join(legacy, "\n") {
		t.Fatalf("aggregated discovery:\n%s\nlegacy discovery:\n%s", strings.Join(aggregated, "\n"), strings.Join(legacy, "\n"))
	}
	for _, want := range []string{"example.com/v1 widgets Widget ns", "example.com/v1 widgets/scale Scale ns", "apps/v1 deployments/scale Scale ns", "v1 pods Pod ns"} {
		if !strings.Contains(strings.Join(aggregated, "\n"), want) {
			t.Errorf("aggregated discovery lacks %q", want)
		}
	}
}

var aggregatedGVK = schema.GroupVersionKind{Group: "apidiscovery.k8s.io", Version: "v2", Kind: "APIGroupDiscoveryList"}

// discoveredResources is every group/version's resources as client-go reports them, one line
// each, sorted: the aggregated or the legacy way.
func discoveredResources(t *testing.T, cfg *rest.Config, legacy bool) []string {
	t.Helper()
	dc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	dc.UseLegacyDiscovery = legacy
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range lists {
		for _, r := range l.APIResources {
			scope := "cluster"
			if r.Namespaced {
				scope = "ns"
			}
			verbs := append([]string(nil), r.Verbs...)
			sort.Strings(verbs)
			out = append(out, fmt.Sprintf("%s %s %s %s %v %v %v", l.GroupVersion, r.Name, r.Kind, scope, verbs, r.ShortNames, r.Categories))
		}
	}
	sort.Strings(out)
	return out
}
