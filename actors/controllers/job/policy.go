package job

import (
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// matchFailurePolicy returns the action of the first rule of the Job's pod failure policy that
// matches a failed pod (Count when none does) and the message a FailJob records.
func matchFailurePolicy(job *batchv1.Job, p *corev1.Pod) (batchv1.PodFailurePolicyAction, string) {
	pfp := job.Spec.PodFailurePolicy
	if pfp == nil || p.Status.Phase != corev1.PodFailed {
		return batchv1.PodFailurePolicyActionCount, ""
	}
	for i, r := range pfp.Rules {
		if r.OnExitCodes != nil {
			if name, code, ok := matchExitCodes(r.OnExitCodes, p); ok {
				return r.Action, fmt.Sprintf("Container %s for pod %s/%s failed with exit code %d matching %s rule at index %d",
					name, p.Namespace, p.Name, code, r.Action, i)
			}
			continue
		}
		for _, want := range r.OnPodConditions {
			for _, have := range p.Status.Conditions {
				if have.Type == want.Type && have.Status == want.Status {
					return r.Action, fmt.Sprintf("Pod %s/%s has condition %s matching %s rule at index %d",
						p.Namespace, p.Name, want.Type, r.Action, i)
				}
			}
		}
	}
	return batchv1.PodFailurePolicyActionCount, ""
}

// matchExitCodes finds a container (of the named one, if set) that ended with a non-zero exit
// code the requirement selects.
func matchExitCodes(r *batchv1.PodFailurePolicyOnExitCodesRequirement, p *corev1.Pod) (string, int32, bool) {
	statuses := append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, s := range statuses {
		term := s.State.Terminated
		if term == nil || term.ExitCode == 0 || r.ContainerName != nil && *r.ContainerName != s.Name {
			continue
		}
		in := slices.Contains(r.Values, term.ExitCode)
		if in == (r.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn) {
			return s.Name, term.ExitCode, true
		}
	}
	return "", 0, false
}

// recordBackoff updates the Job's failure record once this sync's outcomes are stored: a
// success resets the count of consecutive failures.
func (c *controller) recordBackoff(jc *jobCtx) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.failures[jc.key]
	if jc.newSucceeded > 0 {
		rec.failures = 0
	}
	if jc.newFailed > 0 {
		rec.failures += jc.newFailed
		if jc.lastFailure.After(rec.lastFailure) {
			rec.lastFailure = jc.lastFailure
		}
	}
	c.failures[jc.key] = rec
}

// backoffLeft is how long new pods must still wait after the latest failures: Backoff doubled
// per consecutive failure, at most MaxBackoff.
func (c *controller) backoffLeft(key string, now time.Time) time.Duration {
	c.mu.Lock()
	rec := c.failures[key]
	c.mu.Unlock()
	if rec.failures == 0 {
		return 0
	}
	delay := c.backoff
	for i := 1; i < rec.failures && delay < c.maxBackoff; i++ {
		delay *= 2
	}
	return rec.lastFailure.Add(min(delay, c.maxBackoff)).Sub(now)
}

func pastDeadline(job *batchv1.Job, now time.Time) bool {
	d, ok := deadlineLeft(job, now)
	return ok && d <= 0
}

// deadlineLeft is the time to spec.activeDeadlineSeconds from the start (ok false without one).
func deadlineLeft(job *batchv1.Job, now time.Time) (time.Duration, bool) {
	ads := job.Spec.ActiveDeadlineSeconds
	if ads == nil || job.Status.StartTime == nil || suspended(job) {
		return 0, false
	}
	return job.Status.StartTime.Add(time.Duration(*ads) * time.Second).Sub(now), true
}

func suspended(job *batchv1.Job) bool { return job.Spec.Suspend != nil && *job.Spec.Suspend }

func hasCondition(st *batchv1.JobStatus, t batchv1.JobConditionType) bool {
	for _, c := range st.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func conditionOf(st *batchv1.JobStatus, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t && st.Conditions[i].Status == corev1.ConditionTrue {
			return &st.Conditions[i]
		}
	}
	return nil
}

// finishedCondition is the Job's Complete or Failed condition, if it has one.
func finishedCondition(job *batchv1.Job) *batchv1.JobCondition {
	if c := conditionOf(&job.Status, batchv1.JobComplete); c != nil {
		return c
	}
	return conditionOf(&job.Status, batchv1.JobFailed)
}

// interimCondition is the FailureTarget or SuccessCriteriaMet condition, if set.
func interimCondition(st *batchv1.JobStatus) *batchv1.JobCondition {
	if c := conditionOf(st, batchv1.JobFailureTarget); c != nil {
		return c
	}
	return conditionOf(st, batchv1.JobSuccessCriteriaMet)
}

// setCondition sets a condition and reports whether it changed. A False condition is only
// written over an existing one (a Job never suspended has no Suspended condition).
func setCondition(st *batchv1.JobStatus, t batchv1.JobConditionType, status corev1.ConditionStatus, reason, msg string, now time.Time) bool {
	ts := metav1.NewTime(now)
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status == status && c.Reason == reason && c.Message == msg {
			return false
		}
		if c.Status != status {
			c.LastTransitionTime = ts
		}
		c.Status, c.Reason, c.Message, c.LastProbeTime = status, reason, msg, ts
		return true
	}
	if status == corev1.ConditionFalse {
		return false
	}
	st.Conditions = append(st.Conditions, batchv1.JobCondition{Type: t, Status: status, Reason: reason, Message: msg,
		LastProbeTime: ts, LastTransitionTime: ts})
	return true
}
