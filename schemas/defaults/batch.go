package defaults

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kubernetes' batch/v1 defaults.
const (
	defaultBackoffLimit               = 6
	defaultSuccessfulJobsHistoryLimit = 3
	defaultFailedJobsHistoryLimit     = 1
)

// The unprefixed labels Kubernetes still adds beside the batch.kubernetes.io/ ones.
const (
	LegacyJobNameLabel       = "job-name"
	LegacyControllerUIDLabel = "controller-uid"
)

// Job defaults as kube-apiserver does: completions and parallelism 1 when both are unset,
// parallelism 1, backoffLimit 6, NonIndexed, not suspended, no manual selector, the pod
// replacement policy, and the template's Pod spec. Once the Job has a UID (on create) it also
// gets the selector the apiserver generates (see GenerateJobSelector).
func Job(j *batchv1.Job) {
	if len(j.Labels) == 0 && len(j.Spec.Template.Labels) > 0 {
		j.Labels = copyLabels(j.Spec.Template.Labels)
	}
	JobSpec(&j.Spec)
	if j.UID != "" && !*j.Spec.ManualSelector {
		GenerateJobSelector(j)
	}
}

// JobSpec defaults a Job's spec (also a CronJob's job template).
func JobSpec(s *batchv1.JobSpec) {
	if s.Completions == nil && s.Parallelism == nil {
		s.Completions = ptr(int32(1))
	}
	if s.Parallelism == nil {
		s.Parallelism = ptr(int32(1))
	}
	if s.BackoffLimit == nil {
		s.BackoffLimit = ptr(int32(defaultBackoffLimit))
	}
	if s.CompletionMode == nil {
		s.CompletionMode = ptr(batchv1.NonIndexedCompletion)
	}
	if s.Suspend == nil {
		s.Suspend = ptr(false)
	}
	if s.ManualSelector == nil {
		s.ManualSelector = ptr(false)
	}
	if pfp := s.PodFailurePolicy; pfp != nil {
		for i := range pfp.Rules {
			for k := range pfp.Rules[i].OnPodConditions {
				if c := &pfp.Rules[i].OnPodConditions[k]; c.Status == "" {
					c.Status = corev1.ConditionTrue
				}
			}
		}
	}
	if s.PodReplacementPolicy == nil {
		policy := batchv1.TerminatingOrFailed
		if s.PodFailurePolicy != nil {
			policy = batchv1.Failed
		}
		s.PodReplacementPolicy = &policy
	}
	PodSpec(&s.Template.Spec)
}

// GenerateJobSelector adds the labels that tie a Job's pods to it (job-name and controller-uid,
// in the batch.kubernetes.io/ and the legacy form) to its template, and selects the
// controller-uid, as kube-apiserver does on create. Labels the user set are kept: a conflict is
// then validation's to refuse.
func GenerateJobSelector(j *batchv1.Job) {
	t := &j.Spec.Template
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	for _, k := range []string{LegacyJobNameLabel, batchv1.JobNameLabel} {
		if _, ok := t.Labels[k]; !ok {
			t.Labels[k] = j.Name
		}
	}
	for _, k := range []string{LegacyControllerUIDLabel, batchv1.ControllerUidLabel} {
		if _, ok := t.Labels[k]; !ok {
			t.Labels[k] = string(j.UID)
		}
	}
	if j.Spec.Selector == nil {
		j.Spec.Selector = &metav1.LabelSelector{}
	}
	if j.Spec.Selector.MatchLabels == nil {
		j.Spec.Selector.MatchLabels = map[string]string{}
	}
	if _, ok := j.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel]; !ok {
		j.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel] = string(j.UID)
	}
}

// CronJob defaults concurrencyPolicy Allow, not suspended, the history limits (3 successful,
// 1 failed) and the job template's Pod spec; the rest of the template is defaulted on each Job
// it creates, as in Kubernetes.
func CronJob(cj *batchv1.CronJob) {
	s := &cj.Spec
	if s.ConcurrencyPolicy == "" {
		s.ConcurrencyPolicy = batchv1.AllowConcurrent
	}
	if s.Suspend == nil {
		s.Suspend = ptr(false)
	}
	if s.SuccessfulJobsHistoryLimit == nil {
		s.SuccessfulJobsHistoryLimit = ptr(int32(defaultSuccessfulJobsHistoryLimit))
	}
	if s.FailedJobsHistoryLimit == nil {
		s.FailedJobsHistoryLimit = ptr(int32(defaultFailedJobsHistoryLimit))
	}
	PodSpec(&s.JobTemplate.Spec.Template.Spec)
}

func copyLabels(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
