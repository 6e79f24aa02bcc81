package events

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// An object's events past its burst are dropped but still counted: the first write after the
// bucket refills carries every occurrence, on the object the earlier writes made.
func TestCorrelatorCountsDroppedRepeats(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	c := newCorrelator(clk)
	event := func() *corev1.Event {
		now := metav1.NewTime(clk.Now())
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: "default", GenerateName: "web."},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web", UID: "u1", APIVersion: "v1"},
			Reason:         "BackOff", Message: "Back-off restarting failed container", Type: corev1.EventTypeWarning,
			Count: 1, FirstTimestamp: now, LastTimestamp: now,
			Source: corev1.EventSource{Component: "kubelet", Host: "n1"},
		}
	}
	first := clk.Now()
	written := 0
	for i := 1; i <= 40; i++ {
		ev := c.correlate(event())
		if i > spamBurst {
			if ev != nil {
				t.Fatalf("event %d passed the spam filter after a burst of %d", i, spamBurst)
			}
			continue
		}
		if ev == nil || ev.Count != int32(i) {
			t.Fatalf("event %d: got %+v, want count %d", i, ev, i)
		}
		if i > 1 && (ev.Name != "web.1" || ev.ResourceVersion != "7") {
			t.Fatalf("repeat %d names %q at %q, want the written object web.1 at 7", i, ev.Name, ev.ResourceVersion)
		}
		stored := ev.DeepCopy()
		stored.Name, stored.ResourceVersion = "web.1", "7"
		c.written(stored)
		written++
		clk.Step(time.Second)
	}
	clk.Step(5 * time.Minute) // one token back
	ev := c.correlate(event())
	if ev == nil || ev.Count != 41 || ev.Name != "web.1" || !ev.FirstTimestamp.Time.Equal(first) {
		t.Fatalf("after the refill: got %+v, want count 41 on web.1 first seen at %v", ev, first)
	}
	if c.correlate(event()) != nil {
		t.Fatal("a second event after a one-token refill passed the spam filter")
	}
	if written != spamBurst {
		t.Fatalf("%d writes, want %d", written, spamBurst)
	}
}
