package job

import (
	"context"
	"errors"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

// jobCtx is one sync's view of a Job: its pods sorted by what they count as, and the status
// being rebuilt (on a copy of the cached Job).
type jobCtx struct {
	job         *batchv1.Job
	key         string
	now         time.Time
	pods        []*corev1.Pod
	active      []*corev1.Pod
	ready       int32
	terminating int32
	restarts    int32 // container restarts of active pods (restartPolicy OnFailure)

	uncounted    uncounted
	completed    indexSet
	release      []*corev1.Pod // finished pods whose finalizer goes once their outcome is stored
	released     sets.Set[types.UID]
	removing     sets.Set[types.UID] // pods whose finalizer removal the cache did not show yet
	needsFlush   bool
	newSucceeded int
	newFailed    int
	lastFailure  time.Time
	failJob      string // message of a FailJob rule of the pod failure policy that matched
}

func (c *controller) reconcile(ctx context.Context, key string) error {
	if podKey, ok := isOrphanKey(key); ok {
		return c.releaseOrphan(ctx, podKey)
	}
	ns, name := controllerkit.SplitKey(key)
	o, ok := c.jobs.Get(ns, name)
	if !ok {
		c.exp.Forget(key)
		return nil
	}
	cached := o.(*batchv1.Job)
	if cached.Spec.ManagedBy != nil && *cached.Spec.ManagedBy != ManagedBy {
		return nil // another controller runs it, as spec.managedBy asks
	}
	// Decide on expectations first: the cache read below then includes what they awaited.
	satisfied := c.exp.Satisfied(key)
	removing := c.removals.pending()
	pods, claimErr := c.claimPods(ctx, cached)
	if finishedCondition(cached) != nil || cached.DeletionTimestamp != nil {
		_, err := c.removeFinalizers(ctx, tracked(pods, removing))
		return errors.Join(claimErr, err)
	}
	jc := newJobCtx(cached, key, pods, c.now())
	jc.removing = removing
	c.account(jc)
	return errors.Join(claimErr, c.syncJob(ctx, jc, satisfied))
}

func newJobCtx(cached *batchv1.Job, key string, pods []*corev1.Pod, now time.Time) *jobCtx {
	job := cached.DeepCopy()
	jc := &jobCtx{job: job, key: key, now: now, pods: pods,
		uncounted: newUncounted(job.Status.UncountedTerminatedPods), released: sets.New[types.UID]()}
	if isIndexed(job) {
		jc.completed = parseIndexes(job.Status.CompletedIndexes, int(completions(job)))
	}
	for _, p := range pods {
		switch {
		case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		case p.DeletionTimestamp != nil:
			jc.terminating++
		default:
			jc.active = append(jc.active, p)
			if controllerkit.IsPodReady(p) {
				jc.ready++
			}
			for _, s := range p.Status.ContainerStatuses {
				jc.restarts += s.RestartCount
			}
		}
	}
	return jc
}

// syncJob decides the Job's fate, runs or stops its pods, stores the outcome of finished
// pods before releasing them, and writes the status.
func (c *controller) syncJob(ctx context.Context, jc *jobCtx, satisfied bool) error {
	job := jc.job
	target := c.decideTarget(jc)
	var manageErr error
	var requeue time.Duration
	switch {
	case target != nil:
		manageErr = c.deletePods(ctx, jc, jc.active)
	case suspended(job):
		if setCondition(&job.Status, batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended", jc.now) {
			c.rec.Eventf(ctx, job, corev1.EventTypeNormal, "Suspended", "Job suspended")
		}
		manageErr = c.deletePods(ctx, jc, jc.active)
	default:
		if setCondition(&job.Status, batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed", jc.now) {
			c.rec.Eventf(ctx, job, corev1.EventTypeNormal, "Resumed", "Job resumed")
			job.Status.StartTime = nil // the active deadline counts from the resume
		}
		if job.Status.StartTime == nil {
			job.Status.StartTime = &metav1.Time{Time: jc.now}
		}
		if satisfied {
			requeue, manageErr = c.manage(ctx, jc)
		}
	}
	if err := c.track(ctx, jc); err != nil {
		return errors.Join(manageErr, err)
	}
	if target != nil && jc.terminalReached() {
		c.finish(ctx, jc, target)
	}
	statusErr := c.writeStatus(ctx, jc)
	if d, ok := deadlineLeft(job, jc.now); ok && target == nil && (requeue == 0 || d < requeue) {
		requeue = d
	}
	if requeue > 0 {
		c.queue.AddAfter(jc.key, requeue)
	}
	return errors.Join(manageErr, statusErr)
}

// decideTarget returns the Job's FailureTarget or SuccessCriteriaMet condition, adding it
// when this sync reaches one: the terminal condition follows once every pod has finished.
func (c *controller) decideTarget(jc *jobCtx) *batchv1.JobCondition {
	st := &jc.job.Status
	if cond := interimCondition(st); cond != nil {
		return cond
	}
	var ctype batchv1.JobConditionType
	var reason, msg string
	switch {
	case jc.failJob != "":
		ctype, reason, msg = batchv1.JobFailureTarget, batchv1.JobReasonPodFailurePolicy, jc.failJob
	case jc.failed()+jc.onFailureRestarts() > *jc.job.Spec.BackoffLimit:
		ctype, reason, msg = batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"
	case pastDeadline(jc.job, jc.now):
		ctype, reason, msg = batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline"
	case jc.complete():
		ctype, reason, msg = batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"
	default:
		return nil
	}
	setCondition(st, ctype, corev1.ConditionTrue, reason, msg, jc.now)
	return interimCondition(st)
}

// finish adds the terminal condition (Complete or Failed) named by target.
func (c *controller) finish(ctx context.Context, jc *jobCtx, target *batchv1.JobCondition) {
	st := &jc.job.Status
	if target.Type == batchv1.JobSuccessCriteriaMet {
		setCondition(st, batchv1.JobComplete, corev1.ConditionTrue, target.Reason, target.Message, jc.now)
		st.CompletionTime = &metav1.Time{Time: jc.now}
		c.rec.Eventf(ctx, jc.job, corev1.EventTypeNormal, "Completed", "Job completed")
		return
	}
	setCondition(st, batchv1.JobFailed, corev1.ConditionTrue, target.Reason, target.Message, jc.now)
	c.rec.Eventf(ctx, jc.job, corev1.EventTypeWarning, target.Reason, "%s", target.Message)
}

// terminalReached: no pod runs or terminates any more and every outcome is counted and
// released.
func (jc *jobCtx) terminalReached() bool {
	if len(jc.active) > 0 || !jc.uncounted.empty() {
		return false
	}
	for _, p := range jc.pods {
		terminal := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		if !terminal || isTracked(p, jc.removing) && !jc.released.Has(p.UID) {
			return false
		}
	}
	return true
}

func (jc *jobCtx) failed() int32 { return jc.job.Status.Failed + int32(jc.uncounted.failed.Len()) }

func (jc *jobCtx) succeeded() int32 {
	if isIndexed(jc.job) {
		return int32(jc.completed.Len())
	}
	return jc.job.Status.Succeeded + int32(jc.uncounted.succeeded.Len())
}

func (jc *jobCtx) onFailureRestarts() int32 {
	if jc.job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		return 0
	}
	return jc.restarts
}

// complete: the completions succeeded or, without completions, one pod succeeded and none runs.
func (jc *jobCtx) complete() bool {
	if c := jc.job.Spec.Completions; c != nil {
		return jc.succeeded() >= *c
	}
	return jc.succeeded() > 0 && len(jc.active) == 0
}

func (c *controller) writeStatus(ctx context.Context, jc *jobCtx) error {
	st := &jc.job.Status
	st.Active = int32(len(jc.active))
	st.Ready = &jc.ready
	st.Terminating = &jc.terminating
	if isIndexed(jc.job) {
		st.CompletedIndexes = jc.completed.String()
		st.Succeeded = int32(jc.completed.Len())
	}
	st.UncountedTerminatedPods = jc.uncounted.status()
	cached, ok := c.jobs.Get(jc.job.Namespace, jc.job.Name)
	if ok && apiequality.Semantic.DeepEqual(cached.(*batchv1.Job).Status, *st) && cached.(*batchv1.Job).ResourceVersion == jc.job.ResourceVersion {
		return nil
	}
	return c.updateStatus(ctx, jc)
}

func (c *controller) updateStatus(ctx context.Context, jc *jobCtx) error {
	out, err := c.client.UpdateStatus(ctx, jc.job)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	jc.job = out.(*batchv1.Job)
	return nil
}

// claimPods returns the pods the Job controls, adopting matching orphans as ReplicaSets do.
func (c *controller) claimPods(ctx context.Context, job *batchv1.Job) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil || sel.Empty() {
		return nil, nil // validation forbids this
	}
	candidates := controllerkit.ClaimCandidates(c.pods, job)
	claimed, err := controllerkit.Claim(ctx, c.client, job, gvk, sel, candidates, job.DeletionTimestamp == nil)
	return podsOf(claimed), err
}

func podsOf(objs []runtime.Object) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if o != nil {
			out = append(out, o.(*corev1.Pod))
		}
	}
	return out
}
