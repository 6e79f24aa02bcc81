package queue

import "github.com/skiff-sh/skiff/internal/metrics"

// The queues a pod can enter, as kube-scheduler's queue metrics name them.
const (
	active        = "active"
	backoff       = "backoff"
	unschedulable = "unschedulable"
)

var (
	incoming = metrics.Counter("skiff_scheduler_queue_incoming_pods_total",
		"Pods added to a scheduling queue (active, backoff, unschedulable), by the event that sent them.", "queue", "event")
	pending = metrics.Gauge("skiff_scheduler_pending_pods",
		"Pods waiting in the unschedulable pool for a cluster event that may make them fit.", "queue")
)

func countIncoming(queue, event string) { incoming.WithLabelValues(queue, event).Inc() }

func setPending(n int) { pending.WithLabelValues(unschedulable).Set(float64(n)) }
