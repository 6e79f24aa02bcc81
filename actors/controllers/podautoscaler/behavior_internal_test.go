package podautoscaler

import (
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/schemas/defaults"
)

func defaultLimits(min, max int32) limits {
	return limits{min: min, max: max, up: defaults.ScaleUpRules(nil), down: defaults.ScaleDownRules(nil)}
}

// decide runs one sync's behavior at now: stabilize, limit, and record the change.
func decide(h *history, now time.Time, current, desired int32, l limits) decision {
	d := h.limitRate(now, current, h.stabilize(now, current, desired, l), l)
	h.record(now, current, d.replicas, l)
	return d
}

func TestScaleDownWaitsForTheStabilizationWindow(t *testing.T) {
	l := defaultLimits(1, 10)
	l.down.StabilizationWindowSeconds = ptr.To(int32(60))
	h := &history{}
	if d := decide(h, t0, 5, 5, l); d.replicas != 5 {
		t.Fatalf("%+v", d)
	}
	// Load drops: for 60 s the highest recommendation (5) holds.
	for _, at := range []time.Duration{10 * time.Second, 30 * time.Second, 59 * time.Second} {
		if d := decide(h, t0.Add(at), 5, 2, l); d.replicas != 5 {
			t.Fatalf("at +%s: %d replicas; want 5 within the window", at, d.replicas)
		}
	}
	if d := decide(h, t0.Add(61*time.Second), 5, 2, l); d.replicas != 2 {
		t.Fatalf("after the window: %d replicas; want 2", d.replicas)
	}
}

func TestDefaultScaleDownWindowIsFiveMinutes(t *testing.T) {
	h := &history{}
	l := defaultLimits(1, 10)
	decide(h, t0, 4, 4, l)
	if d := decide(h, t0.Add(299*time.Second), 4, 1, l); d.replicas != 4 {
		t.Fatalf("at 299 s: %d; want 4", d.replicas)
	}
	if d := decide(h, t0.Add(301*time.Second), 4, 1, l); d.replicas != 1 {
		t.Fatalf("at 301 s: %d; want 1", d.replicas)
	}
}

func TestScaleUpRateByDefaultPolicies(t *testing.T) {
	h := &history{}
	l := defaultLimits(1, 100)
	// From 1: the larger of +4 pods and +100% is 5.
	if d := decide(h, t0, 1, 40, l); d.replicas != 5 || d.reason != "ScaleUpLimit" {
		t.Fatalf("%+v; want 5 by ScaleUpLimit", d)
	}
	// Within the same 15 s period the budget is spent: from the period's start (1), +4 is 5.
	if d := decide(h, t0.Add(5*time.Second), 5, 40, l); d.replicas != 5 {
		t.Fatalf("+5s: %+v; want 5", d)
	}
	// Both default policies share the 15 s period; its one change counts once: from 2 at the
	// period's start, +4 (6) beats +100% (4).
	h2 := &history{}
	decide(h2, t0, 2, 3, l)
	if d := decide(h2, t0.Add(5*time.Second), 3, 40, l); d.replicas != 6 {
		t.Fatalf("shared period: %+v; want 6", d)
	}
	// A new period: from 5, +100% (10) beats +4 (9).
	if d := decide(h, t0.Add(16*time.Second), 5, 40, l); d.replicas != 10 {
		t.Fatalf("+16s: %+v; want 10", d)
	}
	// maxReplicas caps with its own reason.
	l.max = 12
	if d := decide(h, t0.Add(40*time.Second), 10, 40, l); d.replicas != 12 || d.reason != "TooManyReplicas" {
		t.Fatalf("%+v; want 12 by TooManyReplicas", d)
	}
}

func TestScaleDownPoliciesAndSelect(t *testing.T) {
	l := defaultLimits(1, 10)
	l.down = defaults.ScaleDownRules(&autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To(int32(0)),
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 60},
			{Type: autoscalingv2.PercentScalingPolicy, Value: 50, PeriodSeconds: 60},
		}})
	// Max allows the larger change: 50% of 8 (down to 4) beats 1 pod (down to 7).
	h := &history{}
	if d := decide(h, t0, 8, 1, l); d.replicas != 4 || d.reason != "ScaleDownLimit" {
		t.Fatalf("Max: %+v; want 4", d)
	}
	// Min allows the smaller: one pod.
	l.down.SelectPolicy = ptr.To(autoscalingv2.MinChangePolicySelect)
	h = &history{}
	if d := decide(h, t0, 8, 1, l); d.replicas != 7 {
		t.Fatalf("Min: %+v; want 7", d)
	}
	// The period's change counts: 10 s later nothing more may go.
	if d := decide(h, t0.Add(10*time.Second), 7, 1, l); d.replicas != 7 {
		t.Fatalf("Min, same period: %+v; want 7", d)
	}
	// Disabled never scales down.
	l.down.SelectPolicy = ptr.To(autoscalingv2.DisabledPolicySelect)
	if d := decide(&history{}, t0, 8, 1, l); d.replicas != 8 {
		t.Fatalf("Disabled: %+v; want 8", d)
	}
	// minReplicas bounds below whatever the policy allows.
	l.down.SelectPolicy, l.min = ptr.To(autoscalingv2.MaxChangePolicySelect), 6
	if d := decide(&history{}, t0, 8, 1, l); d.replicas != 6 || d.reason != "TooFewReplicas" {
		t.Fatalf("min 6: %+v; want 6 by TooFewReplicas", d)
	}
}

func TestScaleUpStabilizationTakesTheLowest(t *testing.T) {
	l := defaultLimits(1, 10)
	l.up.StabilizationWindowSeconds = ptr.To(int32(30))
	h := &history{}
	decide(h, t0, 2, 2, l)
	// A spike proposes 6, but the window still holds a 2.
	if d := decide(h, t0.Add(10*time.Second), 2, 6, l); d.replicas != 2 {
		t.Fatalf("%+v; want 2 while the window holds 2", d)
	}
	if d := decide(h, t0.Add(31*time.Second), 2, 6, l); d.replicas != 6 {
		t.Fatalf("%+v; want 6 once every recommendation in the window is 6", d)
	}
}
