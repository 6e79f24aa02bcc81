package scheduler

import (
	"time"

	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/internal/metrics"
)

// Results of one scheduling attempt, as kube-scheduler labels them.
const (
	resultScheduled     = "scheduled"
	resultUnschedulable = "unschedulable"
	resultError         = "error"
)

var (
	attempts = metrics.Counter("skiff_scheduler_schedule_attempts_total",
		"Scheduling attempts by result: scheduled (bound), unschedulable (no node fits) or error.", "result")
	informerEvents = metrics.Counter("skiff_scheduler_informer_events_total",
		"Informer events the scheduler actor handled, by resource (pods, nodes) and type (added, updated, deleted).", "resource", "type")
	droppedEvents = metrics.Counter("skiff_scheduler_events_dropped_total",
		"Events (Scheduled, FailedScheduling) not written because the scheduler's event backlog was full.").WithLabelValues()
	attemptDuration = metrics.Histogram("skiff_scheduler_scheduling_attempt_duration_seconds",
		"Time from the start of a scheduling cycle to the end of its bind, by result.", "result")
)

func observeAttempt(result string, start time.Time) {
	attempts.WithLabelValues(result).Inc()
	attemptDuration.WithLabelValues(result).Observe(metrics.Since(start))
}

var eventTypes = map[informer.EventType]string{informer.Added: "added", informer.Updated: "updated", informer.Deleted: "deleted"}

func countEvent(resource string, t informer.EventType) {
	informerEvents.WithLabelValues(resource, eventTypes[t]).Inc()
}
