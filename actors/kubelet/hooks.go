package kubelet

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// runHook runs a lifecycle handler against a container attempt within limit: exec in the
// container, httpGet against the pod (as a probe would, host defaulting to the pod IP), sleep.
// tcpSocket is kept by Kubernetes for compatibility only and does nothing there either.
func (k *kubelet) runHook(ctx context.Context, h *corev1.LifecycleHandler, c *corev1.Container, podIP, id string, limit time.Duration) (bool, string) {
	switch {
	case h.Exec != nil || h.HTTPGet != nil:
		p := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: h.Exec, HTTPGet: h.HTTPGet},
			TimeoutSeconds: int32(max(limit/time.Second, 1))}
		return k.probes.probe(ctx, p, c, podIP, id)
	case h.Sleep != nil:
		t := time.NewTimer(min(time.Duration(h.Sleep.Seconds)*time.Second, limit))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return true, ""
}

// postStart runs the container's postStart hook right after its start, bounded by the pod's
// grace period so a hook that hangs cannot hold the pod's sync for ever. A failed hook kills
// the container (its restart is the restart policy's, under back-off) and says why.
func (k *kubelet) postStart(ctx context.Context, pod *corev1.Pod, c *corev1.Container, podIP, id string) *waitInfo {
	if c.Lifecycle == nil || c.Lifecycle.PostStart == nil {
		return nil
	}
	ok, msg := k.runHook(ctx, c.Lifecycle.PostStart, c, podIP, id, terminationGrace(pod))
	if ok {
		return nil
	}
	k.recorder.Eventf(ctx, pod, corev1.EventTypeWarning, "FailedPostStartHook", "PostStartHook failed: %s", msg)
	if err := k.rt.KillContainer(ctx, id, terminationGrace(pod)); err != nil {
		msg += "; killing it: " + err.Error()
	}
	return &waitInfo{"PostStartHookError", msg}
}

// preStop runs the container's preStop hook before its stop signal and returns what is left
// of the grace period for the signal: the hook and the stop share one grace, as in Kubernetes.
func (k *kubelet) preStop(ctx context.Context, pod *corev1.Pod, name, id string, grace time.Duration) time.Duration {
	c := containerNamed(pod, name)
	if c == nil || c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		return grace
	}
	deadline := time.Now().Add(grace)
	hctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if ok, msg := k.runHook(hctx, c.Lifecycle.PreStop, c, pod.Status.PodIP, id, grace); !ok {
		k.recorder.Eventf(ctx, pod, corev1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed: %s", msg)
	}
	return max(time.Until(deadline), 0)
}

func containerNamed(pod *corev1.Pod, name string) *corev1.Container {
	for _, c := range allContainers(pod) {
		if c.Name == name {
			return c
		}
	}
	return nil
}
