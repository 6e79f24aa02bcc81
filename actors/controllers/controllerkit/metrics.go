package controllerkit

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skiff-sh/skiff/internal/metrics"
)

var (
	reconcileDuration = metrics.Histogram("skiff_controller_reconcile_duration_seconds",
		"Time one reconcile of a key took, by controller and result (success or error).", "controller", "result")
	reconcileErrors = metrics.Counter("skiff_controller_reconcile_errors_total",
		"Reconciles that failed and were requeued with backoff, by controller.", "controller")
	depthDesc = prometheus.NewDesc("skiff_workqueue_depth", "Keys waiting in a controller's work queue.", []string{"controller"}, nil)
	queues    = &queueCollector{byName: map[string]*Queue{}}
)

func init() { metrics.Register(queues) }

// queueCollector reads every controller's queue length when scraped, so the gauge is never stale.
type queueCollector struct {
	mu     sync.Mutex
	byName map[string]*Queue // the latest controller of each name (tests run several control planes)
}

func (c *queueCollector) add(name string, q *Queue) {
	c.mu.Lock()
	c.byName[name] = q
	c.mu.Unlock()
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- depthDesc }

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, q := range c.byName {
		ch <- prometheus.MustNewConstMetric(depthDesc, prometheus.GaugeValue, float64(q.Len()), name)
	}
}

func observeReconcile(controller string, start time.Time, err error) {
	result := "success"
	if err != nil {
		result = "error"
		reconcileErrors.WithLabelValues(controller).Inc()
	}
	reconcileDuration.WithLabelValues(controller, result).Observe(metrics.Since(start))
}
