package apiserver

import (
	"net/http/httptest"
	"testing"
)

// Label values come from served kinds only: a client cannot mint new series with odd paths.
func TestMetricLabelsAreBounded(t *testing.T) {
	for _, c := range []struct{ method, path, verb, resource string }{
		{"POST", "/apis/apps/v1/namespaces/default/deployments", "create", "deployments"},
		{"POST", "/api/v1/namespaces/default/pods/p/binding", "create", "pods/binding"},
		{"GET", "/api/v1/namespaces/default/pods/p/made-up", "get", "pods"},
		{"GET", "/api/v1/frobs-1234", "list", "unknown"},
		{"GET", "/api/v1/pods?watch=true", "watch", "pods"},
		{"GET", "/metrics", "get", ""},
	} {
		verb, res := metricLabels(httptest.NewRequest(c.method, c.path, nil))
		if verb != c.verb || res != c.resource {
			t.Errorf("%s %s: verb %q resource %q, want %q %q", c.method, c.path, verb, res, c.verb, c.resource)
		}
	}
}
