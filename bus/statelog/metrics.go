package statelog

import (
	"errors"
	"time"

	"github.com/skiff-sh/skiff/internal/metrics"
)

var (
	writeDuration = metrics.Histogram("skiff_statelog_write_duration_seconds",
		"Time from publishing a write to the state stream until JetStream acknowledged it.", "op", "result")
	historyTrimmed = metrics.Counter("skiff_statelog_history_trimmed_total",
		"Events a view let go of to keep its history within its byte bound (watches from before them get 410 Gone).").WithLabelValues()
	watchLag = metrics.Histogram("skiff_statelog_watch_lag_seconds",
		"Time from a write being stored in the stream until its event is handed to a watcher.").WithLabelValues()
	watchersRegistered = metrics.Gauge("skiff_statelog_watchers",
		"Watchers a view is handing events to (kube-apiserver's apiserver_registered_watchers).").WithLabelValues()
	watchersTooSlow = metrics.Counter("skiff_statelog_watchers_too_slow_total",
		"Watchers ended because their buffer stayed full; their clients resume from the last revision they got.").WithLabelValues()
)

func observeWrite(del bool, start time.Time, err error) {
	op := "put"
	if del {
		op = "delete"
	}
	result := "ok"
	switch {
	case errors.Is(err, errWrongLast):
		result = "conflict"
	case err != nil:
		result = "error"
	}
	writeDuration.WithLabelValues(op, result).Observe(metrics.Since(start))
}

// observeLag records how stale a live event is as it goes to its watcher; replayed history
// and snapshots are not lag.
func observeLag(ev Event) {
	if ev.Type != EventBookmark && !ev.Time.IsZero() {
		watchLag.Observe(metrics.Since(ev.Time))
	}
}
