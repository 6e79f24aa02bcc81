package statelog

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// observations is how many values a histogram series holds.
func observations(t *testing.T, o prometheus.Observer) uint64 {
	t.Helper()
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// Writes are timed by result, and a live event's lag is measured from the stream's timestamp;
// a replay from an old revision is history, not lag.
func TestWriteAndWatchLagMetrics(t *testing.T) {
	l := newEnv(t).open(Config{Memory: true})
	c := ctx(t)
	ok, conflict := writeDuration.WithLabelValues("put", "ok"), writeDuration.WithLabelValues("put", "conflict")
	ok0, conflict0 := observations(t, ok), observations(t, conflict)
	first := must[uint64](t)(l.Create(c, "pods/default/first", []byte(`{}`), nil))
	rev := must[uint64](t)(l.Create(c, "pods/default/a", []byte(`{}`), nil))
	if _, err := l.Update(c, "pods/default/a", []byte(`{"x":1}`), rev+100, nil); err == nil {
		t.Fatal("a stale update succeeded")
	}
	if observations(t, ok) != ok0+2 || observations(t, conflict) != conflict0+1 {
		t.Fatalf("put ok %d -> %d, conflict %d -> %d; want two more ok and one conflict", ok0, observations(t, ok), conflict0, observations(t, conflict))
	}
	lag0 := observations(t, watchLag)
	w, err := l.Watch(c, "pods/", WatchOptions{FromRev: first})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if ev := nextNonBookmark(t, w); ev.Rev != rev || ev.Time.IsZero() || time.Since(ev.Time) > time.Minute {
		t.Fatalf("replayed event %+v: want rev %d with the write's time", ev, rev)
	}
	if got := observations(t, watchLag); got != lag0 {
		t.Fatalf("a replayed event counted as lag: %d -> %d", lag0, got)
	}
	rev2 := must[uint64](t)(l.Update(c, "pods/default/a", []byte(`{"x":2}`), rev, nil))
	if ev := nextNonBookmark(t, w); ev.Rev != rev2 {
		t.Fatalf("live event rev %d, want %d", ev.Rev, rev2)
	}
	if got := observations(t, watchLag); got != lag0+1 {
		t.Fatalf("lag observations %d -> %d, want one more for the live event", lag0, got)
	}
}
