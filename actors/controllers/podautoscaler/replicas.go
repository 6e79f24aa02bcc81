package podautoscaler

import (
	"errors"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// podMetric is one pod's usage (milli-units: millicores, or bytes×1000) over a window.
type podMetric struct {
	value     int64
	timestamp time.Time
	window    time.Duration
}

// tolerance is how far from 1 the usage ratio may be before the replicas change (0.1 each way
// by default, as kube-controller-manager's --horizontal-pod-autoscaler-tolerance).
type tolerance struct{ up, down float64 }

func (t tolerance) within(ratio float64) bool { return ratio >= 1-t.down && ratio <= 1+t.up }

// calculator proposes a replica count from the pods' usage as kube's replica calculator does:
// failed and deleting pods are ignored; pending pods, and for CPU pods not yet ready or whose
// sample predates their readiness, count as unready; pods without a sample are missing. The
// ready pods' ratio decides; then missing pods are assumed at the target (when scaling down)
// or at zero (when scaling up), unready pods at zero when scaling up, and the result stands
// only if it does not reverse the direction.
type calculator struct {
	tolerance tolerance
	// cpuInitialization: CPU samples of a pod younger than this count only once it is ready
	// and the sample covers only time after that; readinessDelay: an older pod turning
	// unready within this of its start is still starting, not unready.
	cpuInitialization, readinessDelay time.Duration
	now                               time.Time
}

// resourceTarget is what a Resource or ContainerResource metric aims at: a utilization of the
// requests (percent) or an average value (milli-units) per pod.
type resourceTarget struct {
	utilization  *int32
	averageValue int64
}

// proposal is a metric's replica count and the current figures for status.currentMetrics.
type proposal struct {
	replicas    int32
	utilization *int32 // percent, for a Utilization target
	average     int64  // milli-units per pod
}

var errNoMetrics = errors.New("did not receive metrics for targeted pods (pods might be unready)")

func (c calculator) resourceReplicas(current int32, t resourceTarget, pods []*corev1.Pod, usage map[string]podMetric,
	res corev1.ResourceName, container string) (proposal, error) {
	if len(usage) == 0 {
		return proposal{}, fmt.Errorf("no metrics returned from resource metrics API")
	}
	ready, unready, missing := c.group(pods, usage, res)
	metrics := map[string]int64{}
	for name, m := range usage {
		if ready[name] {
			metrics[name] = m.value
		}
	}
	if len(metrics) == 0 {
		return proposal{}, errNoMetrics
	}
	var requests map[string]int64
	if t.utilization != nil {
		var err error
		if requests, err = podRequests(pods, res, container); err != nil {
			return proposal{}, err
		}
	}
	ratio, p, err := t.ratio(metrics, requests)
	if err != nil {
		return proposal{}, err
	}
	scaleUpWithUnready := len(unready) > 0 && ratio > 1
	if !scaleUpWithUnready && len(missing) == 0 {
		p.replicas = current
		if !c.tolerance.within(ratio) {
			p.replicas = int32(math.Ceil(ratio * float64(len(metrics))))
		}
		return p, nil
	}
	for _, name := range missing {
		switch {
		case ratio < 1 && t.utilization != nil: // as if at the target, at least its request
			metrics[name] = requests[name] * int64(max(100, *t.utilization)) / 100
		case ratio < 1:
			metrics[name] = t.averageValue
		case ratio > 1:
			metrics[name] = 0
		}
	}
	if scaleUpWithUnready {
		for _, name := range unready {
			metrics[name] = 0
		}
	}
	newRatio, _, err := t.ratio(metrics, requests)
	if err != nil {
		return proposal{}, err
	}
	p.replicas = current
	if c.tolerance.within(newRatio) || (ratio < 1 && newRatio > 1) || (ratio > 1 && newRatio < 1) {
		return p, nil
	}
	n := int32(math.Ceil(newRatio * float64(len(metrics))))
	if (newRatio < 1 && n > current) || (newRatio > 1 && n < current) {
		return p, nil
	}
	p.replicas = n
	return p, nil
}

// ratio is usage over target for the pods in metrics, with the current figures.
func (t resourceTarget) ratio(metrics, requests map[string]int64) (float64, proposal, error) {
	var sum, req int64
	for name, v := range metrics {
		sum += v
		if t.utilization != nil {
			r, ok := requests[name]
			if !ok {
				return 0, proposal{}, fmt.Errorf("no request for pod %s", name)
			}
			req += r
		}
	}
	p := proposal{average: sum / int64(len(metrics))}
	if t.utilization == nil {
		return float64(p.average) / float64(t.averageValue), p, nil
	}
	if req == 0 {
		return 0, proposal{}, errors.New("the pods request none of the resource")
	}
	util := int32(sum * 100 / req)
	p.utilization = &util
	return float64(sum*100) / float64(req) / float64(*t.utilization), p, nil
}

// group sorts the pods: ready (with a sample that counts), unready and missing by name.
func (c calculator) group(pods []*corev1.Pod, usage map[string]podMetric, res corev1.ResourceName) (ready map[string]bool, unready, missing []string) {
	ready = map[string]bool{}
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		if p.Status.Phase == corev1.PodPending {
			unready = append(unready, p.Name)
			continue
		}
		m, ok := usage[p.Name]
		if !ok {
			missing = append(missing, p.Name)
			continue
		}
		if res == corev1.ResourceCPU && c.cpuUnready(p, m) {
			unready = append(unready, p.Name)
			continue
		}
		ready[p.Name] = true
	}
	return ready, unready, missing
}

func (c calculator) cpuUnready(p *corev1.Pod, m podMetric) bool {
	var cond *corev1.PodCondition
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			cond = &p.Status.Conditions[i]
		}
	}
	if cond == nil || p.Status.StartTime == nil {
		return true
	}
	start, changed := p.Status.StartTime.Time, cond.LastTransitionTime.Time
	if start.Add(c.cpuInitialization).After(c.now) {
		return cond.Status == corev1.ConditionFalse || m.timestamp.Before(changed.Add(m.window))
	}
	return cond.Status == corev1.ConditionFalse && start.Add(c.readinessDelay).After(changed)
}

// podRequests is each pod's request of res in milli-units: the sum over its containers, or
// the named container's. A container without a request makes utilization undefined.
func podRequests(pods []*corev1.Pod, res corev1.ResourceName, container string) (map[string]int64, error) {
	out := make(map[string]int64, len(pods))
	for _, p := range pods {
		var sum int64
		for _, c := range p.Spec.Containers {
			if container != "" && c.Name != container {
				continue
			}
			q, ok := c.Resources.Requests[res]
			if !ok {
				return nil, fmt.Errorf("missing request for %s in container %s of Pod %s", res, c.Name, p.Name)
			}
			sum += q.MilliValue()
		}
		out[p.Name] = sum
	}
	return out, nil
}
