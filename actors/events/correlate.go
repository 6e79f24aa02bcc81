package events

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
)

// Kubernetes' correlator defaults (client-go tools/record).
const (
	cacheEntries       = 4096
	aggregateMaxEvents = 10
	aggregateInterval  = 600 // seconds
	spamBurst          = 25
	spamQPS            = 1. / 300.
)

// correlator is client-go's EventCorrelator in the same order (aggregate, count, then drop an
// object's spam) without the strategic-merge patch it prepares for every repeat: the Recorder
// writes the whole event, and a ReplicaSet's 10,000 SuccessfulCreate events, all but a few
// dropped as spam, each paid two JSON encodings and a patch diff (2% of the server under the
// system bench). Not safe for concurrent use.
type correlator struct {
	aggregator *record.EventAggregator
	spam       *record.EventSourceObjectSpamFilter
	seen       *lru.Cache // correlation key -> observation
}

// observation is what the correlator last knew of an event's object.
type observation struct {
	count           int32
	firstTimestamp  metav1.Time
	name            string
	resourceVersion string
}

func newCorrelator(clk clock.PassiveClock) *correlator {
	return &correlator{
		aggregator: record.NewEventAggregator(cacheEntries, record.EventAggregatorByReasonFunc,
			record.EventAggregatorByReasonMessageFunc, aggregateMaxEvents, aggregateInterval, clk),
		spam: record.NewEventSourceObjectSpamFilter(cacheEntries, spamBurst, spamQPS, clk, spamKey),
		seen: lru.New(cacheEntries),
	}
}

// correlate returns the event to write (a repeat carries the name, version, first time and
// count of the object it repeats), or nil when it is spam. Dropped repeats still count.
func (c *correlator) correlate(ev *corev1.Event) *corev1.Event {
	aggregated, key := c.aggregator.EventAggregate(ev)
	out := *aggregated
	if v, ok := c.seen.Get(key); ok {
		last := v.(observation)
		out.Name, out.ResourceVersion = last.name, last.resourceVersion
		out.FirstTimestamp, out.Count = last.firstTimestamp, last.count+1
	}
	c.remember(key, &out)
	if c.spam.Filter(&out) {
		return nil
	}
	return &out
}

// written records the object the apiserver returned for a written event.
func (c *correlator) written(ev *corev1.Event) { c.remember(eventKey(ev), ev) }

func (c *correlator) remember(key string, ev *corev1.Event) {
	c.seen.Add(key, observation{count: ev.Count, firstTimestamp: ev.FirstTimestamp, name: ev.Name, resourceVersion: ev.ResourceVersion})
}

// eventKey identifies an exact repeat: everything but the times and count.
func eventKey(ev *corev1.Event) string {
	return strings.Join([]string{spamKey(ev), ev.Reason, ev.Message}, "")
}

// spamKey identifies a source's events about one object.
func spamKey(ev *corev1.Event) string {
	o := &ev.InvolvedObject
	return strings.Join([]string{ev.Source.Component, ev.Source.Host, o.Kind, o.Namespace, o.Name, string(o.UID), o.APIVersion, ev.Type}, "")
}
