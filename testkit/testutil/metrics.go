package testutil

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric sums the series of an in-process metric family (counters and gauges) whose labels
// pass keep; keep nil takes them all.
func Metric(t *testing.T, name string, keep func(labels map[string]string) bool) float64 {
	t.Helper()
	fams, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if keep == nil || keep(labels) {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}
