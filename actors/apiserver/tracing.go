package apiserver

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/skiff-sh/skiff/actors/apiserver/authn"
)

// statusRecorder remembers the response code for the request's span.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// Flush keeps watch streams streaming through the recorder.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection (watch write and body read deadlines).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Hijack lets exec's WebSocket upgrade take the connection over.
func (s *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := s.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the connection cannot be taken over")
	}
	return h.Hijack()
}

// traced gives every API request a server span that continues the caller's W3C trace context;
// the writes it makes store that context in the log (traceHeader). Watches are not traced:
// they are streams, not requests with an end.
func traced(next http.Handler) http.Handler {
	tracer := otel.Tracer("skiff/apiserver")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, ok := parseRequest(r)
		if !ok || info.verb == "watch" {
			next.ServeHTTP(w, r)
			return
		}
		ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		name := info.verb + " " + info.resource
		if info.subresource != "" {
			name += "/" + info.subresource
		}
		// The caller's name (never a credential) lets the span store keep users' traces longest.
		u, _ := authn.UserFrom(r.Context())
		ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("k8s.resource", info.resource), attribute.String("k8s.namespace", info.namespace),
				attribute.String("k8s.name", info.name), attribute.String("k8s.subresource", info.subresource),
				attribute.String("enduser.id", u.Name)))
		defer span.End()
		if u, ok := authn.UserFrom(ctx); ok {
			span.SetAttributes(attribute.String("k8s.user", u.Name))
		}
		if by, ok := authn.ImpersonatorFrom(ctx); ok {
			span.SetAttributes(attribute.String("k8s.impersonator", by.Name))
		}
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r.WithContext(ctx))
		span.SetAttributes(attribute.Int("http.status_code", rec.code))
		if rec.code >= 500 {
			span.SetStatus(codes.Error, http.StatusText(rec.code))
		}
	})
}

// nameSpan names the created object on the request's span: a create's path has no name (it may
// even come from generateName), and the span store finds traces by object.
func nameSpan(ctx context.Context, name string) {
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("k8s.name", name))
}
