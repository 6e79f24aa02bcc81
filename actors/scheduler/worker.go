package scheduler

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/scheduler/framework"
)

// loop runs scheduling cycles one at a time (so two pods are never placed on one snapshot)
// and hands binds to the binders, as kube-scheduler does.
func (a *schedulerActor) loop(ctx context.Context) {
	for {
		// A shut-down queue still hands out what it holds: the incarnation's end (ctx) stops
		// the loop at once instead, as the next incarnation starts from the informers anyway.
		k, quit := a.queue.Get()
		if quit || ctx.Err() != nil {
			return
		}
		a.scheduleOne(ctx, k)
	}
}

// Events are written by a few writers of their own from a bounded backlog at the configured
// rate: a bind never waits for one (they are best-effort, as in Kubernetes, and dropped when
// the backlog is full). The backlog holds what client-go's event broadcaster queues.
const (
	eventWriters = 4
	eventBacklog = 1000
)

// drain runs the jobs of a binder or event writer, so the loop never waits for the API.
func (a *schedulerActor) drain(ctx context.Context, jobs <-chan func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case job := <-jobs:
			job()
		}
	}
}

// event records an Event about pod unless the backlog is full.
func (a *schedulerActor) event(ctx context.Context, pod *corev1.Pod, eventType, reason, format string, args ...any) {
	select {
	case a.events <- func() {
		// Written no faster than the scheduler's event rate, by whichever writer takes it.
		if a.st.eventLimit.Wait(ctx) == nil {
			a.st.recorder.Eventf(ctx, pod, eventType, reason, format, args...)
		}
	}:
	default:
		droppedEvents.Inc()
	}
}

// submit hands a job to a binder, waiting while all are busy.
func (a *schedulerActor) submit(ctx context.Context, job func()) {
	select {
	case a.jobs <- job:
	case <-ctx.Done():
	}
}

// scheduleOne runs one scheduling cycle: it picks a node, assumes the pod there and submits
// the bind; a pod that fits nowhere goes to the unschedulable pool.
func (a *schedulerActor) scheduleOne(ctx context.Context, k string) {
	ns, name := splitKey(k)
	pod, ok := a.st.pods.Get(ns, name)
	if !ok || !pending(pod) {
		a.queue.Finished(k)
		return
	}
	start := time.Now()
	// The cycle continues the trace of the write that created the pod.
	ctx, span := otel.Tracer("skiff/scheduler").Start(a.st.pods.TraceContext(ctx, ns, name), "schedule pod",
		trace.WithAttributes(attribute.String("k8s.pod", k)))
	res, err := framework.Schedule(a.cache.Snapshot(), pod, a.st.cfg.Options)
	if err == nil {
		span.SetAttributes(attribute.String("k8s.node", res.Node))
		err = a.cache.Assume(pod, res.Node)
	}
	var fit *framework.FitError
	switch {
	case errors.As(err, &fit):
		observeAttempt(resultUnschedulable, start)
		span.RecordError(err)
		span.End()
		a.queue.Unschedulable(k, pod, fit.Rejected)
		a.submit(ctx, func() { a.markUnschedulable(ctx, pod, fit.Error()) })
	case err != nil:
		observeAttempt(resultError, start)
		span.RecordError(err)
		span.End()
		a.queue.Failed(k)
	default:
		a.queue.Assumed(k)
		a.submit(ctx, func() {
			defer span.End()
			a.bind(ctx, k, pod, res.Node, start)
		})
	}
}

// bind runs the binding cycle: the pod's WaitForFirstConsumer claims get the node, and the pod
// is bound once they are bound (volumeWaits), at once when it has none.
func (a *schedulerActor) bind(ctx context.Context, k string, pod *corev1.Pod, node string, start time.Time) {
	if err := a.selectNode(ctx, pod, node); err != nil {
		a.bindFailed(ctx, k, pod, err)
		return
	}
	if !a.awaitClaims(k, pod, node, start) {
		a.bindNow(ctx, k, pod, node, start)
	}
}

func (a *schedulerActor) bindNow(ctx context.Context, k string, pod *corev1.Pod, node string, start time.Time) {
	err := a.st.cfg.Client.Bind(ctx, pod.Namespace, pod.Name, node)
	switch {
	case err == nil:
		observeAttempt(resultScheduled, start)
		if a.st.cfg.OnBind != nil {
			a.st.cfg.OnBind(k, node)
		}
		a.event(ctx, pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s to %s", k, node)
		a.queue.Finished(k)
		return
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		// Bound by someone else (or an earlier incarnation), or gone: the informer brings
		// the truth.
		a.cache.Forget(pod)
		a.queue.Finished(k)
		return
	}
	observeAttempt(resultError, start)
	a.bindFailed(ctx, k, pod, err)
}

// bindFailed undoes the assumption and retries the pod with back-off.
func (a *schedulerActor) bindFailed(ctx context.Context, k string, pod *corev1.Pod, err error) {
	a.cache.Forget(pod)
	if ctx.Err() != nil {
		return // the incarnation ends; the next one resyncs
	}
	a.event(ctx, pod, corev1.EventTypeWarning, "FailedScheduling", "Binding rejected: %v", err)
	a.queue.Failed(k)
}

func (a *schedulerActor) markUnschedulable(ctx context.Context, pod *corev1.Pod, msg string) {
	a.event(ctx, pod, corev1.EventTypeWarning, "FailedScheduling", "%s", msg)
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message == msg {
			return
		}
	}
	next := pod.DeepCopy()
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: msg, LastTransitionTime: metav1.NewTime(time.Now().UTC())}
	replaced := false
	for i := range next.Status.Conditions {
		if next.Status.Conditions[i].Type == corev1.PodScheduled {
			next.Status.Conditions[i], replaced = cond, true
		}
	}
	if !replaced {
		next.Status.Conditions = append(next.Status.Conditions, cond)
	}
	_, _ = a.st.cfg.Client.UpdateStatus(ctx, next) // a conflict: the pod moved on (bound, say)
}
