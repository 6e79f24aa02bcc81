package podautoscaler

import (
	"math"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
)

// history is what one HPA's behavior remembers between syncs: its recent recommendations
// (for the stabilization windows) and its scale changes (for the rate policies).
type history struct {
	recs     []recommendation
	up, down []scaleEvent
}

type recommendation struct {
	replicas int32
	at       time.Time
}

type scaleEvent struct {
	change int32
	at     time.Time
}

// limits are the replica bounds and rules a decision works within.
type limits struct {
	min, max int32
	up, down *autoscalingv2.HPAScalingRules // defaulted: no nil fields
}

// decision is the replica count to set and, when a bound or policy held it back, why.
type decision struct {
	replicas        int32
	limited         bool
	reason, message string
}

// stabilize records desired and returns what the windows allow: no higher than the lowest
// recommendation within the scale-up window, no lower than the highest within the scale-down
// window (so a brief dip does not scale down, as kube's stabilizeRecommendationWithBehaviors).
func (h *history) stabilize(now time.Time, current, desired int32, l limits) int32 {
	upWindow := time.Duration(*l.up.StabilizationWindowSeconds) * time.Second
	downWindow := time.Duration(*l.down.StabilizationWindowSeconds) * time.Second
	up, down := desired, desired
	keep := h.recs[:0]
	for _, r := range h.recs {
		age := now.Sub(r.at)
		if age < upWindow {
			up = min(up, r.replicas)
		}
		if age < downWindow {
			down = max(down, r.replicas)
		}
		if age < max(upWindow, downWindow) {
			keep = append(keep, r)
		}
	}
	h.recs = append(keep, recommendation{replicas: desired, at: now})
	out := current
	if out < up {
		out = up
	}
	if out > down {
		out = down
	}
	return out
}

// limitRate bounds the stabilized count by the rate policies over their periods' changes so
// far and by min/max replicas (kube's convertDesiredReplicasWithBehaviorRate).
func (h *history) limitRate(now time.Time, current, stabilized int32, l limits) decision {
	switch {
	case stabilized > current:
		limit := max(policyLimit(current, h.changes(now, h.up, l.up), l.up, true), current)
		if l.max > limit {
			return bound(stabilized, limit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate", true)
		}
		return bound(stabilized, l.max, "TooManyReplicas", "the desired replica count is more than the maximum replica count", true)
	case stabilized < current:
		limit := min(policyLimit(current, h.changes(now, h.down, l.down), l.down, false), current)
		if l.min < limit {
			return bound(stabilized, limit, "ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate", false)
		}
		return bound(stabilized, l.min, "TooFewReplicas", "the desired replica count is less than the minimum replica count", false)
	}
	switch {
	case stabilized > l.max:
		return decision{l.max, true, "TooManyReplicas", "the desired replica count is more than the maximum replica count"}
	case stabilized < l.min:
		return decision{l.min, true, "TooFewReplicas", "the desired replica count is less than the minimum replica count"}
	}
	return decision{replicas: stabilized}
}

// bound caps want at limit from above (up) or below (down).
func bound(want, limit int32, reason, msg string, up bool) decision {
	if (up && want > limit) || (!up && want < limit) {
		return decision{limit, true, reason, msg}
	}
	return decision{replicas: want}
}

// changes sums each policy period's scale events: index by period seconds.
func (h *history) changes(now time.Time, events []scaleEvent, r *autoscalingv2.HPAScalingRules) map[int32]int32 {
	out := map[int32]int32{}
	for _, p := range r.Policies {
		if _, done := out[p.PeriodSeconds]; done {
			continue // policies may share a period (both default scale-up ones do)
		}
		out[p.PeriodSeconds] = 0
		period := time.Duration(p.PeriodSeconds) * time.Second
		for _, e := range events {
			if now.Sub(e.at) < period {
				out[p.PeriodSeconds] += e.change
			}
		}
	}
	return out
}

// policyLimit is how far the rules let the count go from current now: each policy's change
// from the count at its period's start (Pods adds or removes value, Percent grows by value%,
// rounding up, or shrinks by it, rounding down); Max selects the largest change, Min the
// smallest, Disabled none.
func policyLimit(current int32, changed map[int32]int32, r *autoscalingv2.HPAScalingRules, up bool) int32 {
	if *r.SelectPolicy == autoscalingv2.DisabledPolicySelect {
		return current
	}
	sign := int32(1)
	if !up {
		sign = -1
	}
	// The largest change up is the most replicas, down the fewest.
	most := up == (*r.SelectPolicy != autoscalingv2.MinChangePolicySelect)
	var result int32
	for i, p := range r.Policies {
		start := current - sign*changed[p.PeriodSeconds]
		var proposed int32
		switch {
		case p.Type == autoscalingv2.PodsScalingPolicy:
			proposed = start + sign*p.Value
		case up:
			proposed = int32(math.Ceil(float64(start) * (1 + float64(p.Value)/100)))
		default:
			proposed = int32(float64(start) * (1 - float64(p.Value)/100))
		}
		if i == 0 || (most && proposed > result) || (!most && proposed < result) {
			result = proposed
		}
	}
	return result
}

// record keeps a scale change for the rate policies, dropping events older than the longest
// policy period of their direction.
func (h *history) record(now time.Time, from, to int32, l limits) {
	if to > from {
		h.up = append(prune(now, h.up, l.up), scaleEvent{change: to - from, at: now})
	} else if to < from {
		h.down = append(prune(now, h.down, l.down), scaleEvent{change: from - to, at: now})
	}
}

func prune(now time.Time, events []scaleEvent, r *autoscalingv2.HPAScalingRules) []scaleEvent {
	var longest int32
	for _, p := range r.Policies {
		longest = max(longest, p.PeriodSeconds)
	}
	keep := events[:0]
	for _, e := range events {
		if now.Sub(e.at) < time.Duration(longest)*time.Second {
			keep = append(keep, e)
		}
	}
	return keep
}
