// Package metrics is how Skiff's processes expose Prometheus metrics: constructors that
// register on the process's default registry (which also carries the Go runtime and process
// collectors), and the /metrics handler and listener.
package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultListen is where processes without an apiserver serve /metrics (the port the
// OpenTelemetry Prometheus exporter uses by convention).
const DefaultListen = ":9464"

// LatencyBuckets cover sub-millisecond log writes up to slow multi-second requests.
var LatencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// Histogram registers a latency histogram in seconds with LatencyBuckets.
func Histogram(name, help string, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: LatencyBuckets}, labels)
	return register(h)
}

// Counter registers a counter.
func Counter(name, help string, labels ...string) *prometheus.CounterVec {
	return register(prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
}

// Gauge registers a gauge.
func Gauge(name, help string, labels ...string) *prometheus.GaugeVec {
	return register(prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
}

// Register adds a custom collector (one that reads live state when scraped).
func Register(c prometheus.Collector) { register(c) }

// register tolerates a second registration of the same metric (a package built twice into
// tests, say) by returning the one already registered.
func register[C prometheus.Collector](c C) C {
	if err := prometheus.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if prev, ok := are.ExistingCollector.(C); ok {
				return prev
			}
		}
		panic(err)
	}
	return c
}

// Since is the seconds elapsed since start, for Observe.
func Since(start time.Time) float64 { return time.Since(start).Seconds() }

// Handler serves every registered metric in the Prometheus exposition format.
func Handler() http.Handler { return promhttp.Handler() }

// Serve serves GET /metrics on addr until ctx ends ("" serves nothing) and returns the
// address it listens on.
func Serve(ctx context.Context, addr string, logger *slog.Logger) (net.Addr, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && logger != nil {
			logger.Error("metrics listener", "addr", addr, "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	return ln.Addr(), nil
}
