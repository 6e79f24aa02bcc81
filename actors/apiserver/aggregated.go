package apiserver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"mime"
	"net/http"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Aggregated discovery (apidiscovery.k8s.io, KEP-3352): /api and /apis answer every group's
// resources in one document when the client asks for it in Accept, as kubectl and client-go
// v0.37 do; otherwise the legacy documents. Both are built from resourceList, so they agree.
const discoveryGroup = "apidiscovery.k8s.io"

// aggregatedVersion is the apidiscovery version Accept asks for first ("v2" or "v2beta1"), ""
// when it asks for none (the legacy format).
func aggregatedVersion(r *http.Request) string {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		base, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || base != "application/json" || params["g"] != discoveryGroup || params["as"] != "APIGroupDiscoveryList" {
			continue
		}
		// profile=nopeer asks to leave out peers' resources: a Skiff apiserver has the whole
		// API, so the answer is the same.
		if v := params["v"]; v == "v2" || v == "v2beta1" {
			return v
		}
	}
	return ""
}

// serveAggregated writes the aggregated document for /api (core) or /apis (the groups); false
// when the client did not ask for it.
func (s *Server) serveAggregated(w http.ResponseWriter, r *http.Request, core bool) bool {
	v := aggregatedVersion(r)
	if v == "" {
		return false
	}
	list := &apidiscoveryv2.APIGroupDiscoveryList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: discoveryGroup + "/" + v}}
	if core {
		list.Items = []apidiscoveryv2.APIGroupDiscovery{groupDiscovery("", []schema.GroupVersion{{Version: "v1"}})}
	} else {
		for _, g := range apiGroups() {
			var gvs []schema.GroupVersion
			for _, gv := range g.Versions {
				gvs = append(gvs, schema.GroupVersion{Group: g.Name, Version: gv.Version})
			}
			list.Items = append(list.Items, groupDiscovery(g.Name, gvs))
		}
	}
	body, err := json.Marshal(list)
	if err != nil {
		writeError(w, err)
		return true
	}
	// An ETag, as kube sends, lets a caching client (kubectl's discovery cache) revalidate.
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	w.Header().Set("ETag", etag)
	w.Header().Set("Vary", "Accept")
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return true
	}
	w.Header().Set("Content-Type", "application/json;g="+discoveryGroup+";v="+v+";as=APIGroupDiscoveryList")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	return true
}

// groupDiscovery is one group with its versions in preference order.
func groupDiscovery(group string, gvs []schema.GroupVersion) apidiscoveryv2.APIGroupDiscovery {
	out := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: group}}
	for _, gv := range gvs {
		list := resourceList(gv)
		if list == nil {
			continue
		}
		out.Versions = append(out.Versions, apidiscoveryv2.APIVersionDiscovery{
			Version: gv.Version, Resources: resourcesDiscovery(gv, list.APIResources), Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
		})
	}
	return out
}

// resourcesDiscovery folds the legacy list's "resource/subresource" entries into their
// resources, as the aggregated format nests them.
func resourcesDiscovery(gv schema.GroupVersion, legacy []metav1.APIResource) []apidiscoveryv2.APIResourceDiscovery {
	var out []apidiscoveryv2.APIResourceDiscovery
	index := map[string]int{}
	for _, res := range legacy {
		kind := responseKind(gv, res)
		name, sub, isSub := strings.Cut(res.Name, "/")
		if !isSub {
			scope := apidiscoveryv2.ScopeCluster
			if res.Namespaced {
				scope = apidiscoveryv2.ScopeNamespace
			}
			index[name] = len(out)
			out = append(out, apidiscoveryv2.APIResourceDiscovery{
				Resource: name, ResponseKind: kind, Scope: scope, SingularResource: res.SingularName,
				Verbs: res.Verbs, ShortNames: res.ShortNames, Categories: res.Categories,
			})
			continue
		}
		if i, ok := index[name]; ok {
			out[i].Subresources = append(out[i].Subresources, apidiscoveryv2.APISubresourceDiscovery{Subresource: sub, ResponseKind: kind, Verbs: res.Verbs})
		}
	}
	return out
}

// responseKind is the kind a resource answers with; legacy entries leave group and version
// empty when they are the resource's own.
func responseKind(gv schema.GroupVersion, res metav1.APIResource) *metav1.GroupVersionKind {
	k := &metav1.GroupVersionKind{Group: res.Group, Version: res.Version, Kind: res.Kind}
	if k.Group == "" && k.Version == "" {
		k.Group, k.Version = gv.Group, gv.Version
	}
	return k
}
