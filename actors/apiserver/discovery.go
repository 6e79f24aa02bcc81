package apiserver

import (
	"net/http"
	"runtime"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"github.com/skiff-sh/skiff/schemas"
)

// KubernetesVersion is the API level Skiff speaks (the k8s.io modules it is built with).
const KubernetesVersion = "v1.37.2"

func (s *Server) serveVersion(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, version.Info{
		Major: "1", Minor: "37", GitVersion: KubernetesVersion + "+skiff", Platform: runtime.GOOS + "/" + runtime.GOARCH,
		GoVersion: runtime.Version(), Compiler: runtime.Compiler,
	})
}

func (s *Server) serveCoreVersions(w http.ResponseWriter, r *http.Request) {
	if s.serveAggregated(w, r, true) {
		return
	}
	writeJSON(w, http.StatusOK, &metav1.APIVersions{
		TypeMeta:                   metav1.TypeMeta{Kind: "APIVersions"},
		Versions:                   []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}},
	})
}

// groupVersions lists every served group/version except the core group, by group, each
// group's versions in preference order (the order of schemas.Kinds()).
func groupVersions() []schema.GroupVersion {
	seen := map[schema.GroupVersion]bool{}
	var out []schema.GroupVersion
	for _, k := range schemas.Kinds() {
		gv := k.GVK.GroupVersion()
		if gv.Group != "" && !seen[gv] {
			seen[gv] = true
			out = append(out, gv)
		}
	}
	for _, extra := range []map[schema.GroupVersion][]metav1.APIResource{reviewResources, metricsResources} {
		for gv := range extra {
			if !seen[gv] {
				seen[gv] = true
				out = append(out, gv)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// apiGroups folds groupVersions into discovery's groups, the first version preferred.
func apiGroups() []metav1.APIGroup {
	var out []metav1.APIGroup
	for _, gv := range groupVersions() {
		v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
		if n := len(out); n > 0 && out[n-1].Name == gv.Group {
			out[n-1].Versions = append(out[n-1].Versions, v)
			continue
		}
		out = append(out, metav1.APIGroup{Name: gv.Group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v})
	}
	return out
}

func (s *Server) serveGroups(w http.ResponseWriter, r *http.Request) {
	if s.serveAggregated(w, r, false) {
		return
	}
	list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: apiGroups()}
	writeJSON(w, http.StatusOK, list)
}

// serveGroupVersion answers /api/v1, /apis/{group} and /apis/{group}/{version}; false when the
// path is none of those.
func (s *Server) serveGroupVersion(w http.ResponseWriter, r *http.Request) bool {
	parts := splitPath(r.URL.Path)
	var gv schema.GroupVersion
	switch {
	case len(parts) == 2 && parts[0] == "api":
		gv = schema.GroupVersion{Version: parts[1]}
	case len(parts) == 3 && parts[0] == "apis":
		gv = schema.GroupVersion{Group: parts[1], Version: parts[2]}
	case len(parts) == 2 && parts[0] == "apis":
		for _, g := range apiGroups() {
			if g.Name == parts[1] {
				g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
				writeJSON(w, http.StatusOK, &g)
				return true
			}
		}
		return false
	default:
		return false
	}
	list := resourceList(gv)
	if list == nil {
		writeError(w, errNotServed)
		return true
	}
	writeJSON(w, http.StatusOK, list)
	return true
}

var allVerbs = metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

// categoryAll is what `kubectl get all` lists.
var categoryAll = map[string]bool{"pods": true, "services": true, "deployments": true, "replicasets": true, "daemonsets": true, "statefulsets": true}

func resourceList(gv schema.GroupVersion) *metav1.APIResourceList {
	var out []metav1.APIResource
	for _, k := range schemas.Kinds() {
		if k.GVK.GroupVersion() != gv {
			continue
		}
		res := metav1.APIResource{Name: k.Resource, SingularName: k.Singular, Namespaced: k.Namespaced, Kind: k.GVK.Kind,
			Verbs: allVerbs, ShortNames: k.ShortNames}
		if categoryAll[k.Resource] {
			res.Categories = []string{"all"}
		}
		if k.Custom != nil {
			res.Categories = k.Categories
		}
		out = append(out, res)
		for _, sub := range k.Subresources {
			out = append(out, subresource(k, sub))
		}
	}
	out = append(out, reviewResources[gv]...)
	out = append(out, metricsResources[gv]...)
	if out == nil {
		return nil
	}
	return &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String(), APIResources: out}
}

func subresource(k *schemas.Kind, sub string) metav1.APIResource {
	res := metav1.APIResource{Name: k.Resource + "/" + sub, Namespaced: k.Namespaced, Kind: k.GVK.Kind}
	switch sub {
	case "status":
		res.Verbs = metav1.Verbs{"get", "patch", "update"}
	case "scale":
		res.Group, res.Version, res.Kind = "autoscaling", "v1", "Scale"
		res.Verbs = metav1.Verbs{"get", "patch", "update"}
	case "binding":
		res.Kind, res.Verbs = "Binding", metav1.Verbs{"create"}
	case "eviction":
		res.Group, res.Version, res.Kind, res.Verbs = "policy", "v1", "Eviction", metav1.Verbs{"create"}
	case "log":
		res.Kind, res.Verbs = "Pod", metav1.Verbs{"get"}
	case "exec":
		res.Kind, res.Verbs = "PodExecOptions", metav1.Verbs{"create", "get"}
	case "attach":
		res.Kind, res.Verbs = "PodAttachOptions", metav1.Verbs{"create", "get"}
	case "portforward":
		res.Kind, res.Verbs = "PodPortForwardOptions", metav1.Verbs{"create", "get"}
	case "token":
		res.Group, res.Version, res.Kind = "authentication.k8s.io", "v1", "TokenRequest"
		res.Verbs = metav1.Verbs{"create"}
	default:
		res.Verbs = metav1.Verbs{"get"}
	}
	return res
}
