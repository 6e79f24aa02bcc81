package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

// Job tracking with finalizers, as Kubernetes does it: every pod is created with the
// batch.kubernetes.io/job-tracking finalizer, so it cannot vanish before the controller has
// seen how it ended. A finished pod's UID is first written to status.uncountedTerminatedPods
// (an Indexed Job's success to status.completedIndexes), then its finalizer is removed, then
// the UID moves into status.succeeded or status.failed. A crash between any two steps
// repeats the step, and a UID already in the list is never counted twice.

type uncounted struct{ succeeded, failed sets.Set[types.UID] }

func newUncounted(u *batchv1.UncountedTerminatedPods) uncounted {
	out := uncounted{succeeded: sets.New[types.UID](), failed: sets.New[types.UID]()}
	if u != nil {
		out.succeeded.Insert(u.Succeeded...)
		out.failed.Insert(u.Failed...)
	}
	return out
}

func (u uncounted) has(uid types.UID) bool { return u.succeeded.Has(uid) || u.failed.Has(uid) }
func (u uncounted) empty() bool            { return u.succeeded.Len()+u.failed.Len() == 0 }

func (u uncounted) status() *batchv1.UncountedTerminatedPods {
	return &batchv1.UncountedTerminatedPods{Succeeded: sets.List(u.succeeded), Failed: sets.List(u.failed)}
}

type outcome int

const (
	running outcome = iota
	succeeded
	failed
	uncountable // ended by the controller (suspend, success reached): released, not counted
)

// podOutcome says how a tracked pod ended. A pod being deleted counts as failed (it will never
// succeed) once the policy allows replacing terminating pods or its kubelet has let it go.
func podOutcome(job *batchv1.Job, p *corev1.Pod) outcome {
	switch {
	case p.Status.Phase == corev1.PodSucceeded:
		return succeeded
	case p.Status.Phase == corev1.PodFailed:
		return failed
	case p.DeletionTimestamp == nil:
		return running
	case suspended(job) || hasCondition(&job.Status, batchv1.JobSuccessCriteriaMet):
		return uncountable
	case *job.Spec.PodReplacementPolicy == batchv1.TerminatingOrFailed,
		p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds == 0:
		return failed
	}
	return running
}

// account records the outcome of every tracked pod that finished since the last sync.
func (c *controller) account(jc *jobCtx) {
	for _, p := range jc.pods {
		if !isTracked(p, jc.removing) {
			continue
		}
		if jc.uncounted.has(p.UID) {
			jc.release = append(jc.release, p) // stored by an earlier sync
			continue
		}
		switch podOutcome(jc.job, p) {
		case running:
			continue
		case succeeded:
			jc.accountSuccess(p)
		case failed:
			jc.accountFailure(p)
		}
		jc.release = append(jc.release, p)
	}
}

func (jc *jobCtx) accountSuccess(p *corev1.Pod) {
	if !isIndexed(jc.job) {
		jc.uncounted.succeeded.Insert(p.UID)
		jc.needsFlush, jc.newSucceeded = true, jc.newSucceeded+1
		return
	}
	// The completion index is the record: a second pod of a done index counts nothing.
	if ix := completionIndex(p); ix >= 0 && ix < int(completions(jc.job)) && !jc.completed.Has(ix) {
		jc.completed.Insert(ix)
		jc.needsFlush, jc.newSucceeded = true, jc.newSucceeded+1
	}
}

func (jc *jobCtx) accountFailure(p *corev1.Pod) {
	action, msg := matchFailurePolicy(jc.job, p)
	switch action {
	case batchv1.PodFailurePolicyActionIgnore:
		return // replaced without counting towards the backoff limit
	case batchv1.PodFailurePolicyActionFailJob:
		if jc.failJob == "" {
			jc.failJob = msg
		}
	}
	jc.uncounted.failed.Insert(p.UID)
	jc.needsFlush, jc.newFailed = true, jc.newFailed+1
	if t := finishTime(p, jc.now); t.After(jc.lastFailure) {
		jc.lastFailure = t
	}
}

// finishTime is when the pod's last container ended (or now, for a pod that never ran).
func finishTime(p *corev1.Pod, now time.Time) time.Time {
	var t time.Time
	for _, s := range p.Status.ContainerStatuses {
		if term := s.State.Terminated; term != nil && term.FinishedAt.After(t) {
			t = term.FinishedAt.Time
		}
	}
	if t.IsZero() {
		return now
	}
	return t
}

// track stores what account found, releases those pods, then counts the released ones.
func (c *controller) track(ctx context.Context, jc *jobCtx) error {
	if jc.needsFlush {
		st := &jc.job.Status
		st.UncountedTerminatedPods = jc.uncounted.status()
		if isIndexed(jc.job) {
			st.CompletedIndexes, st.Succeeded = jc.completed.String(), int32(jc.completed.Len())
		}
		if err := c.updateStatus(ctx, jc); err != nil {
			return err // nothing released: the next sync accounts the same pods again
		}
		c.recordBackoff(jc)
	}
	released, err := c.removeFinalizers(ctx, jc.release)
	jc.released = released
	present := sets.New[types.UID]()
	for _, p := range jc.pods {
		if isTracked(p, jc.removing) && !released.Has(p.UID) {
			present.Insert(p.UID)
		}
	}
	// A UID whose pod no longer carries the finalizer (or is gone) is safe to count.
	for _, uid := range sets.List(jc.uncounted.succeeded) {
		if !present.Has(uid) {
			jc.uncounted.succeeded.Delete(uid)
			jc.job.Status.Succeeded++
		}
	}
	for _, uid := range sets.List(jc.uncounted.failed) {
		if !present.Has(uid) {
			jc.uncounted.failed.Delete(uid)
			jc.job.Status.Failed++
		}
	}
	return err
}

// isTracked: p still carries the tracking finalizer, as far as removing (the removals the
// cache did not show yet) tells.
func isTracked(p *corev1.Pod, removing sets.Set[types.UID]) bool {
	return hasTrackingFinalizer(p) && !removing.Has(p.UID)
}

func tracked(pods []*corev1.Pod, removing sets.Set[types.UID]) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if isTracked(p, removing) {
			out = append(out, p)
		}
	}
	return out
}

// removeFinalizers removes the tracking finalizer from pods (in parallel) and returns the UIDs
// it is gone from.
func (c *controller) removeFinalizers(ctx context.Context, pods []*corev1.Pod) (sets.Set[types.UID], error) {
	var mu sync.Mutex
	done := sets.New[types.UID]()
	var wg sync.WaitGroup
	errs := make([]error, len(pods))
	for i, p := range pods {
		if !hasTrackingFinalizer(p) {
			continue
		}
		c.removals.expect(p.UID)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = c.removeFinalizer(ctx, p); errs[i] != nil {
				c.removals.observed(p.UID)
				return
			}
			mu.Lock()
			done.Insert(p.UID)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return done, errors.Join(errs...)
}

type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// removeFinalizer is a JSON patch that tests the pod's UID and the finalizer's position, so
// it never touches a newer pod of the same name or another finalizer.
func (c *controller) removeFinalizer(ctx context.Context, p *corev1.Pod) error {
	for i, f := range p.Finalizers {
		if f != batchv1.JobTrackingFinalizer {
			continue
		}
		at := fmt.Sprintf("/metadata/finalizers/%d", i)
		body, _ := json.Marshal([]patchOp{{"test", "/metadata/uid", p.UID}, {"test", at, f}, {"remove", at, nil}})
		_, err := c.client.Patch(ctx, controllerkit.MustKind("", "pods"), p.Namespace, p.Name, "", "application/json-patch+json", body)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	return nil
}

// releaseOrphan removes the finalizer of a pod whose Job is gone (deleted, or never seen).
// The Job is read from the API, not the cache: a pod may reach this process before its Job.
func (c *controller) releaseOrphan(ctx context.Context, podKey string) error {
	ns, name := controllerkit.SplitKey(podKey)
	o, ok := c.pods.Get(ns, name)
	if !ok {
		return nil
	}
	p := o.(*corev1.Pod)
	if !hasTrackingFinalizer(p) {
		return nil
	}
	if ref := p.OwnerReferences; len(ref) > 0 {
		for _, r := range ref {
			if r.Kind != gvk.Kind || r.Controller == nil || !*r.Controller {
				continue
			}
			j, err := c.client.Get(ctx, controllerkit.MustKind("batch", "jobs"), ns, r.Name)
			if err == nil && j.(*batchv1.Job).UID == r.UID {
				c.queue.Add(controllerkit.Key(ns, r.Name)) // it exists: its own sync decides
				return nil
			}
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return c.removeFinalizer(ctx, p)
}
