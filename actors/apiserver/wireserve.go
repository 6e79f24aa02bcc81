package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/skiff-sh/skiff/actors/apiwire"
)

// ServeWire answers one apiwire.Request in its JSON wire form (ServeRequest).
func (s *Server) ServeWire(ctx context.Context, req apiwire.Request) []byte {
	out, _ := json.Marshal(s.ServeRequest(ctx, req))
	return out
}

// ServeRequest answers one apiwire.Request through the whole HTTP handler chain; a watch is a
// long poll answered with an apiwire.WatchBatch (wirewatch.go).
func (s *Server) ServeRequest(ctx context.Context, req apiwire.Request) apiwire.Response {
	ctx = withWirePoll(s.wireContext(ctx))
	rec := &wireResponse{header: http.Header{}}
	if r, err := wireHTTPRequest(ctx, req); err != nil {
		writeError(rec, err)
	} else {
		s.Handler().ServeHTTP(rec, r)
	}
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	return apiwire.Response{Code: rec.code, Body: rec.body}
}

// wireResponse records the answer to a wire request. An encoding made for this one answer is
// handed over and kept as it is (writeOwned), not copied into a growing buffer as
// httptest.ResponseRecorder would copy it.
type wireResponse struct {
	header http.Header
	code   int
	body   []byte
}

func (w *wireResponse) Header() http.Header { return w.header }

func (w *wireResponse) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *wireResponse) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.body = append(w.body, p...)
	return len(p), nil
}

// handOver keeps p, which the caller gives up, as the body or its continuation.
func (w *wireResponse) handOver(p []byte) {
	if w.body == nil {
		w.WriteHeader(http.StatusOK)
		w.body = p
		return
	}
	_, _ = w.Write(p)
}

// Flush is a no-op: the answer goes out whole when the handler returns.
func (w *wireResponse) Flush() {}

// writeOwned writes p, which the caller gives up, handing it over where the writer under any
// wrappers keeps it (wireResponse).
func writeOwned(w http.ResponseWriter, p []byte) {
	for {
		switch t := w.(type) {
		case *wireResponse:
			t.handOver(p)
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			_, _ = w.Write(p)
			return
		}
	}
}

// wireBody is a wire request's body, already in memory: readBody takes its bytes as they are
// instead of reading them into a copy.
type wireBody struct {
	*bytes.Reader
	data []byte
}

func (wireBody) Close() error { return nil }

// wireHTTPRequest is req as the HTTP request the handler serves. It fills the fields
// httptest.NewRequest would (host, remote address, HTTP/1.1) without its parse of a request
// line through net/http's reader, which was ~1.5% of the server's CPU at 500 Lease renewals a
// second.
func wireHTTPRequest(ctx context.Context, req apiwire.Request) (*http.Request, error) {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	u, err := url.ParseRequestURI(req.Path)
	if err != nil {
		return nil, badRequest("request path %q: %v", req.Path, err)
	}
	// Made with its context, not copied again by WithContext.
	r, err := http.NewRequestWithContext(ctx, method, "/", nil)
	if err != nil {
		return nil, badRequest("request method %q: %v", method, err)
	}
	r.URL, r.RequestURI = u, req.Path
	r.Body, r.ContentLength = wireBody{bytes.NewReader(req.Body), req.Body}, int64(len(req.Body))
	r.Host, r.RemoteAddr = "example.com", "192.0.2.1:1234"
	if req.ContentType != "" {
		r.Header.Set("Content-Type", req.ContentType)
	}
	for k, v := range req.Header {
		r.Header.Set(k, v)
	}
	return r, nil
}
