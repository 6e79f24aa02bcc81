package apiserver

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/actors/apiserver/authn"
)

func TestAuthzAttributes(t *testing.T) {
	u := authn.User{Name: "bob"}
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/api/v1/namespaces/x/pods", "list  pods  x  true"},
		{"GET", "/api/v1/namespaces/x/pods?watch=1", "watch  pods  x  true"},
		{"GET", "/api/v1/watch/namespaces/x/pods", "watch  pods  x  true"},
		{"GET", "/api/v1/namespaces/x/pods/p/log", "get  pods log x p true"},
		{"GET", "/api/v1/namespaces/x/pods/p/exec", "create  pods exec x p true"},
		{"POST", "/api/v1/namespaces/x/pods/p/binding", "create  pods binding x p true"},
		{"PUT", "/apis/apps/v1/namespaces/x/deployments/d/scale", "update apps deployments scale x d true"},
		{"GET", "/api/v1/namespaces/x", "get  namespaces  x x true"},
		{"DELETE", "/api/v1/nodes", "deletecollection  nodes    true"},
		{"GET", "/metrics", "get      false"},
		{"HEAD", "/api", "get      false"},
	} {
		r := httptest.NewRequest(c.method, c.path, nil)
		a := authzAttributes(r, u)
		got := strings.Join([]string{a.Verb, a.APIGroup, a.Resource, a.Subresource, a.Namespace, a.Name, map[bool]string{true: "true", false: "false"}[a.ResourceRequest]}, " ")
		if got != c.want {
			t.Errorf("%s %s: %q, want %q", c.method, c.path, got, c.want)
		}
	}
}

// FuzzAuthzAttributes: whatever the path, the attributes name a verb, and a resource request
// names a resource; nothing panics.
func FuzzAuthzAttributes(f *testing.F) {
	for _, p := range []string{"/api/v1/namespaces/x/pods/p/log", "/apis/apps/v1/watch/namespaces/x/deployments", "/api//v1/", "/apis/a/b/c/d/e/f/g", "/%2e%2e/api", "/api/0//00"} {
		f.Add("GET", p)
	}
	f.Fuzz(func(t *testing.T, method, path string) {
		u, err := url.Parse(path)
		if err != nil || !strings.HasPrefix(u.Path, "/") {
			return
		}
		r := &http.Request{Method: method, URL: u, Header: http.Header{}}
		a := authzAttributes(r, authn.User{Name: "f"})
		if a.Verb == "" && method != "" {
			t.Fatalf("%s %s: no verb", method, path)
		}
		if a.ResourceRequest && a.Resource == "" {
			t.Fatalf("%s %s: resource request without a resource", method, path)
		}
		if !a.ResourceRequest && a.Path != u.Path {
			t.Fatalf("%s %s: path %q", method, path, a.Path)
		}
	})
}
