package apiserver

import (
	"net/http"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// requestInfo is what a Kubernetes-style path and method mean.
type requestInfo struct {
	verb        string // get list watch create update patch delete deletecollection
	gv          schema.GroupVersion
	resource    string
	namespace   string
	name        string
	subresource string
	query       url.Values
}

// Subresources of a namespace; any other third segment under namespaces/{ns} is a resource.
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

// parseRequest maps /api/v1/... and /apis/{group}/{version}/... to a requestInfo; ok is false
// for paths that are not resource paths (discovery and the like).
func parseRequest(r *http.Request) (requestInfo, bool) {
	parts := splitPath(r.URL.Path)
	info := requestInfo{query: r.URL.Query()}
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		info.gv = schema.GroupVersion{Version: parts[1]}
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		info.gv = schema.GroupVersion{Group: parts[1], Version: parts[2]}
		parts = parts[3:]
	default:
		return info, false
	}
	watchPath := false
	if parts[0] == "watch" { // legacy /api/v1/watch/... form
		watchPath = true
		parts = parts[1:]
		if len(parts) == 0 {
			return info, false
		}
	}
	if parts[0] == "namespaces" && len(parts) > 1 {
		info.namespace = parts[1]
		if len(parts) > 2 && !namespaceSubresources[parts[2]] {
			parts = parts[2:]
		} else {
			// The namespace object itself: namespaces/{name}[/status].
			info.name = parts[1]
			info.namespace = ""
			parts = append([]string{"namespaces"}, parts[2:]...)
			info.resource = "namespaces"
			if len(parts) > 1 {
				info.subresource = parts[1]
			}
			info.verb = verbFor(r.Method, true, watchPath || isWatch(info.query))
			return info, true
		}
	}
	info.resource = parts[0]
	if len(parts) > 1 {
		info.name = parts[1]
	}
	if len(parts) > 2 {
		info.subresource = parts[2]
	}
	if len(parts) > 3 {
		return info, false
	}
	info.verb = verbFor(r.Method, info.name != "", watchPath || isWatch(info.query))
	return info, true
}

func verbFor(method string, named, watch bool) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		if watch {
			return "watch"
		}
		if named {
			return "get"
		}
		return "list"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		if named {
			return "delete"
		}
		return "deletecollection"
	}
	return ""
}

func isWatch(q url.Values) bool {
	w := q.Get("watch")
	return w == "true" || w == "1"
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}
