package apiserver

import (
	"net/http"
	"strconv"
	"time"

	"github.com/skiff-sh/skiff/internal/metrics"
	"github.com/skiff-sh/skiff/schemas"
)

var (
	requestDuration = metrics.Histogram("skiff_apiserver_request_duration_seconds",
		"API request latency by verb, resource and response code (watches are streams and not timed).", "verb", "resource", "code")
	requestsTotal = metrics.Counter("skiff_apiserver_request_total",
		"API requests by verb, resource and response code.", "verb", "resource", "code")
	inflight = metrics.Gauge("skiff_apiserver_current_inflight_requests",
		"API requests being served now, by kind (readOnly or mutating).", "request_kind")
)

// instrumented counts and times every API request. Paths outside the resource API (discovery,
// /metrics itself) count with an empty resource. Long-running requests (watches, logs, exec)
// are counted but neither timed nor in flight, as in kube-apiserver: they are streams.
func instrumented(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		verb, resource := metricLabels(r)
		stream := verb == "watch" || longRunning[resource]
		if !stream {
			kind := "readOnly"
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				kind = "mutating"
			}
			g := inflight.WithLabelValues(kind)
			g.Inc()
			defer g.Dec()
		}
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		code := strconv.Itoa(rec.code)
		requestsTotal.WithLabelValues(verb, resource, code).Inc()
		if !stream {
			requestDuration.WithLabelValues(verb, resource, code).Observe(metrics.Since(start))
		}
	})
}

var longRunning = map[string]bool{"pods/log": true, "pods/exec": true, "pods/attach": true, "pods/portforward": true}

// metricLabels are a request's verb and resource[/subresource], bounded: a path naming no
// served kind counts as resource "unknown", so clients cannot mint label values.
func metricLabels(r *http.Request) (verb, resource string) {
	info, ok := parseRequest(r)
	if !ok {
		return verbFor(r.Method, true, false), ""
	}
	k, found := schemas.ByResource(info.gv.Group, info.gv.Version, info.resource)
	if !found {
		return info.verb, "unknown"
	}
	resource = k.Resource
	if info.subresource != "" && hasSubresource(k, info.subresource) {
		resource += "/" + info.subresource
	}
	return info.verb, resource
}

// Handle serves extra endpoints (metrics, traces) on the apiserver's listener, behind the
// same handler chain as the API.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }
