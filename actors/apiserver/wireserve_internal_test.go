package apiserver

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/skiff-sh/skiff/actors/apiwire"
)

// TestWireRequestMatchesHTTPTest: the request a NATS call becomes is the one httptest built
// before (what handlers read of it), and a path httptest could not parse is a 400, not a panic.
func TestWireRequestMatchesHTTPTest(t *testing.T) {
	ctx := context.Background()
	for _, req := range []apiwire.Request{
		{Method: "PUT", Path: "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", ContentType: "application/json",
			Body: []byte(`{"kind":"Lease"}`), Header: map[string]string{"User-Agent": "skiff-node", "traceparent": "00-x"}},
		{Path: "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&watch=1&resourceVersion=12"},
		{Method: "GET", Path: "/apis"},
		{Method: "PATCH", Path: "/api/v1/namespaces/a%2Fb/configmaps/c?fieldManager=x", ContentType: "application/merge-patch+json", Body: []byte(`{}`)},
	} {
		got, err := wireHTTPRequest(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", req.Path, err)
		}
		method := req.Method
		if method == "" {
			method = http.MethodGet
		}
		want := httptest.NewRequestWithContext(ctx, method, req.Path, bytes.NewReader(req.Body))
		if req.ContentType != "" {
			want.Header.Set("Content-Type", req.ContentType)
		}
		for k, v := range req.Header {
			want.Header.Set(k, v)
		}
		type view struct {
			Method, RequestURI, Proto, Host, RemoteAddr string
			ProtoMajor, ProtoMinor                      int
			URL                                         string
			Path, RawPath, RawQuery                     string
			Header                                      http.Header
			ContentLength                               int64
			Close                                       bool
			TLS                                         bool
		}
		see := func(r *http.Request) view {
			return view{r.Method, r.RequestURI, r.Proto, r.Host, r.RemoteAddr, r.ProtoMajor, r.ProtoMinor, r.URL.String(),
				r.URL.Path, r.URL.RawPath, r.URL.RawQuery, r.Header, r.ContentLength, r.Close, r.TLS != nil}
		}
		if g, w := see(got), see(want); !reflect.DeepEqual(g, w) {
			t.Errorf("%s:\n got %+v\nwant %+v", req.Path, g, w)
		}
		if body, _ := io.ReadAll(got.Body); !bytes.Equal(body, req.Body) {
			t.Errorf("%s: body %q, want %q", req.Path, body, req.Body)
		}
	}
	if _, err := wireHTTPRequest(ctx, apiwire.Request{Method: "GET", Path: "api/v1/pods"}); err == nil {
		t.Error("a relative path was accepted")
	}
}
