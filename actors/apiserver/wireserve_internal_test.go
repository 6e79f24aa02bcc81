package apiserver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

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

// TestWireResponseRecordsAsHTTPTest: the wire answer holds what httptest's recorder would
// (code and body) whether the handler writes, hands its encoding over through wrappers, or
// both; a handed-over encoding is kept, not copied.
func TestWireResponseRecordsAsHTTPTest(t *testing.T) {
	type step func(w http.ResponseWriter)
	header := func(code int) step { return func(w http.ResponseWriter) { w.WriteHeader(code) } }
	write := func(s string) step { return func(w http.ResponseWriter) { _, _ = w.Write([]byte(s)) } }
	owned := func(s string) step { return func(w http.ResponseWriter) { writeOwned(w, []byte(s)) } }
	for name, steps := range map[string][]step{
		"nothing":                 nil,
		"a write":                 {write("a")},
		"a code then an encoding": {header(201), owned("enc")},
		"an encoding then writes": {owned("enc"), write("-1"), write("-2")},
		"writes then an encoding": {write("w"), owned("enc")},
		"a late code is ignored":  {owned("enc"), header(500)},
	} {
		want := httptest.NewRecorder()
		got := &wireResponse{header: http.Header{}}
		for _, st := range steps {
			st(want)
			st(&statusRecorder{ResponseWriter: got})
		}
		code := got.code
		if code == 0 {
			code = http.StatusOK
		}
		if code != want.Code || !bytes.Equal(got.body, want.Body.Bytes()) {
			t.Errorf("%s: got %d %q, want %d %q", name, code, got.body, want.Code, want.Body.Bytes())
		}
	}
	enc := []byte("encoded once")
	w := &wireResponse{header: http.Header{}}
	writeOwned(&statusRecorder{ResponseWriter: w}, enc)
	if &w.body[0] != &enc[0] {
		t.Error("the handed-over encoding was copied")
	}
}

// TestWireBodyReadWithoutCopy: a wire request's body is read as it is, and one over the
// limit is refused with 413 as an HTTP body is.
func TestWireBodyReadWithoutCopy(t *testing.T) {
	s := &Server{opts: Options{MaxBodyBytes: 8}}
	for _, body := range []string{"12345678", "123456789"} {
		r, err := wireHTTPRequest(context.Background(), apiwire.Request{Method: "POST", Path: "/api/v1/pods", Body: []byte(body)})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.readBody(httptest.NewRecorder(), r)
		if len(body) > 8 {
			var se apierrors.APIStatus
			if !errors.As(err, &se) || se.Status().Code != http.StatusRequestEntityTooLarge {
				t.Errorf("a body of %d bytes over a limit of 8: %v, want 413", len(body), err)
			}
			continue
		}
		if err != nil || string(got) != body {
			t.Fatalf("body %q: got %q, %v", body, got, err)
		}
		if wb := r.Body.(wireBody); &got[0] != &wb.data[0] {
			t.Error("the wire body was copied")
		}
	}
}
