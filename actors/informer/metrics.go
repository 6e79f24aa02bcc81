package informer

import (
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/internal/metrics"
)

var (
	eventsTotal = metrics.Counter("skiff_informer_events_total",
		"Changes an informer applied to its cache, by resource and type (PUT or DELETE).", "resource", "type")
	relists = metrics.Counter("skiff_informer_relists_total",
		"Fresh snapshots an informer took because its watch could not resume, by resource.", "resource")
)

func (i *Informer) countEvent(ev statelog.Event) {
	eventsTotal.WithLabelValues(i.kind.Resource, ev.Type.String()).Inc()
}
