package validation

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Kubernetes' limits on batch objects.
const (
	maxParallelismForIndexedJob = 100000
	maxCompletionsForIndexedJob = 100000
	maxCronJobNameLength        = 52 // leaves room for the "-<minutes>" suffix of its Jobs
	maxExitCodeValues           = 255
	jobControllerName           = "kubernetes.io/job-controller"
)

// Job validates a Job: its spec as kube-apiserver's ValidateJob does, and the selector it
// generated (unless spec.manualSelector).
func Job(j *batchv1.Job) field.ErrorList {
	errs := objectMeta(&j.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	errs = append(errs, generatedSelector(j)...)
	return append(errs, jobSpec(&j.Spec, specPath, false)...)
}

// generatedSelector checks that a Job without a manual selector selects its own UID, as the
// apiserver generated it: a user-supplied controller-uid must not point elsewhere.
func generatedSelector(j *batchv1.Job) field.ErrorList {
	if j.Spec.ManualSelector != nil && *j.Spec.ManualSelector {
		return nil
	}
	if j.UID == "" || j.Spec.Selector == nil {
		return nil // not generated yet (a dry run of a client); the selector rule reports it
	}
	uid := string(j.UID)
	var errs field.ErrorList
	if v := j.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel]; v != uid {
		errs = append(errs, field.Invalid(specPath.Child("selector").Child("matchLabels"), j.Spec.Selector.MatchLabels,
			"`selector` not auto-generated; set `manualSelector: true` to choose one"))
	}
	if v := j.Spec.Template.Labels[batchv1.ControllerUidLabel]; v != uid {
		errs = append(errs, field.Invalid(specPath.Child("template", "metadata", "labels"), j.Spec.Template.Labels,
			"must have the auto-generated "+batchv1.ControllerUidLabel+" label "+uid))
	}
	return errs
}

// jobSpec checks a Job's spec; inTemplate is a CronJob's job template, whose selector the
// apiserver generates later and so must be left out.
func jobSpec(s *batchv1.JobSpec, p *field.Path, inTemplate bool) field.ErrorList {
	var errs field.ErrorList
	optNonNegative := func(v *int32, name string) {
		if v != nil {
			errs = append(errs, nonNegative(int64(*v), p.Child(name))...)
		}
	}
	optNonNegative(s.Parallelism, "parallelism")
	optNonNegative(s.Completions, "completions")
	optNonNegative(s.BackoffLimit, "backoffLimit")
	optNonNegative(s.TTLSecondsAfterFinished, "ttlSecondsAfterFinished")
	if s.ActiveDeadlineSeconds != nil {
		errs = append(errs, positive(*s.ActiveDeadlineSeconds, p.Child("activeDeadlineSeconds"))...)
	}
	errs = append(errs, jobSelector(s, p, inTemplate)...)
	errs = append(errs, completionMode(s, p)...)
	errs = append(errs, unsupportedJobFields(s, p)...)
	if s.ManagedBy != nil {
		errs = append(errs, managedBy(*s.ManagedBy, p.Child("managedBy"))...)
	}
	tp := p.Child("template")
	errs = append(errs, labelMap(s.Template.Labels, tp.Child("metadata", "labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(s.Template.Annotations, tp.Child("metadata", "annotations"))...)
	ps := tp.Child("spec")
	errs = append(errs, PodSpec(&s.Template.Spec, ps)...)
	rp := s.Template.Spec.RestartPolicy
	if rp != corev1.RestartPolicyOnFailure && rp != corev1.RestartPolicyNever {
		allowed := []corev1.RestartPolicy{corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}
		if rp == "" {
			errs = append(errs, field.Required(ps.Child("restartPolicy"), `valid values: "OnFailure", "Never"`))
		} else {
			errs = append(errs, field.NotSupported(ps.Child("restartPolicy"), rp, allowed))
		}
	}
	if s.PodFailurePolicy != nil {
		if rp != corev1.RestartPolicyNever && rp != "" {
			errs = append(errs, field.Invalid(ps.Child("restartPolicy"), rp, `only "Never" is supported when podFailurePolicy is specified`))
		}
		errs = append(errs, podFailurePolicy(s.PodFailurePolicy, &s.Template.Spec, p.Child("podFailurePolicy"))...)
	}
	if rpp := s.PodReplacementPolicy; rpp != nil {
		errs = append(errs, oneOf(*rpp, p.Child("podReplacementPolicy"), batchv1.TerminatingOrFailed, batchv1.Failed)...)
		if s.PodFailurePolicy != nil && *rpp != batchv1.Failed {
			errs = append(errs, field.NotSupported(p.Child("podReplacementPolicy"), *rpp, []batchv1.PodReplacementPolicy{batchv1.Failed}))
		}
	}
	return errs
}

func jobSelector(s *batchv1.JobSpec, p *field.Path, inTemplate bool) field.ErrorList {
	sp := p.Child("selector")
	if inTemplate {
		if s.Selector != nil && (s.ManualSelector == nil || !*s.ManualSelector) {
			return field.ErrorList{field.Invalid(sp, s.Selector, "`selector` will be auto-generated")}
		}
		if s.Selector == nil {
			return nil
		}
	}
	errs := selector(s.Selector, sp, "job")
	if s.Selector != nil && len(s.Selector.MatchLabels)+len(s.Selector.MatchExpressions) > 0 {
		if sel, err := metav1.LabelSelectorAsSelector(s.Selector); err == nil && !sel.Matches(labels.Set(s.Template.Labels)) {
			errs = append(errs, field.Invalid(p.Child("template", "metadata", "labels"), s.Template.Labels, "`selector` does not match template `labels`"))
		}
	}
	return errs
}

func completionMode(s *batchv1.JobSpec, p *field.Path) field.ErrorList {
	if s.CompletionMode == nil {
		return nil
	}
	cp := p.Child("completionMode")
	errs := oneOf(*s.CompletionMode, cp, batchv1.NonIndexedCompletion, batchv1.IndexedCompletion)
	if *s.CompletionMode != batchv1.IndexedCompletion {
		return errs
	}
	if s.Completions == nil {
		errs = append(errs, field.Required(p.Child("completions"), fmt.Sprintf("when completion mode is %s", batchv1.IndexedCompletion)))
	} else if *s.Completions > maxCompletionsForIndexedJob {
		errs = append(errs, field.Invalid(p.Child("completions"), *s.Completions, fmt.Sprintf("must be less than or equal to %d when completion mode is %s", maxCompletionsForIndexedJob, batchv1.IndexedCompletion)))
	}
	if s.Parallelism != nil && *s.Parallelism > maxParallelismForIndexedJob {
		errs = append(errs, field.Invalid(p.Child("parallelism"), *s.Parallelism, fmt.Sprintf("must be less than or equal to %d when completion mode is %s", maxParallelismForIndexedJob, batchv1.IndexedCompletion)))
	}
	return errs
}

// unsupportedJobFields refuses what Skiff's Job controller does not implement, rather than
// accepting a Job it would run differently from what was asked.
func unsupportedJobFields(s *batchv1.JobSpec, p *field.Path) field.ErrorList {
	return forbidSet(p, "is not supported by Skiff's Job controller", optionalField{"successPolicy", s.SuccessPolicy != nil},
		optionalField{"backoffLimitPerIndex", s.BackoffLimitPerIndex != nil}, optionalField{"maxFailedIndexes", s.MaxFailedIndexes != nil})
}

func managedBy(v string, p *field.Path) field.ErrorList {
	if v == jobControllerName {
		return nil
	}
	errs := messages(p, v, labelKeyMessages(v))
	if len(v) > 63 {
		errs = append(errs, field.TooLong(p, v, 63))
	}
	return errs
}

func labelKeyMessages(v string) []string {
	var msgs []string
	for _, e := range labelKey(v, nil) {
		msgs = append(msgs, e.Detail)
	}
	return msgs
}

func podFailurePolicy(pfp *batchv1.PodFailurePolicy, ps *corev1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	containers := sets.New[string]()
	for _, c := range append(append([]corev1.Container(nil), ps.Containers...), ps.InitContainers...) {
		containers.Insert(c.Name)
	}
	rp := p.Child("rules")
	for i, r := range pfp.Rules {
		ip := rp.Index(i)
		// FailIndex needs backoffLimitPerIndex, which Skiff refuses.
		errs = append(errs, oneOf(r.Action, ip.Child("action"), batchv1.PodFailurePolicyActionFailJob,
			batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyActionCount)...)
		switch {
		case r.OnExitCodes != nil && len(r.OnPodConditions) > 0:
			errs = append(errs, field.Invalid(ip, field.OmitValueType{}, "specifying both OnExitCodes and OnPodConditions is not supported"))
		case r.OnExitCodes != nil:
			errs = append(errs, onExitCodes(r.OnExitCodes, containers, ip.Child("onExitCodes"))...)
		case len(r.OnPodConditions) > 0:
			for k, c := range r.OnPodConditions {
				cp := ip.Child("onPodConditions").Index(k)
				errs = append(errs, oneOf(c.Status, cp.Child("status"), corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown)...)
				errs = append(errs, labelKey(string(c.Type), cp.Child("type"))...)
			}
		default:
			errs = append(errs, field.Invalid(ip, field.OmitValueType{}, "specifying one of OnExitCodes and OnPodConditions is required"))
		}
	}
	return errs
}

func onExitCodes(r *batchv1.PodFailurePolicyOnExitCodesRequirement, containers sets.Set[string], p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if r.ContainerName != nil && !containers.Has(*r.ContainerName) {
		errs = append(errs, field.Invalid(p.Child("containerName"), *r.ContainerName, "must be one of the container or initContainer names in the pod template"))
	}
	errs = append(errs, oneOf(r.Operator, p.Child("operator"), batchv1.PodFailurePolicyOnExitCodesOpIn, batchv1.PodFailurePolicyOnExitCodesOpNotIn)...)
	vp := p.Child("values")
	switch {
	case len(r.Values) == 0:
		errs = append(errs, field.Invalid(vp, r.Values, "at least one value is required"))
	case len(r.Values) > maxExitCodeValues:
		errs = append(errs, field.TooMany(vp, len(r.Values), maxExitCodeValues))
	}
	seen := sets.New[int32]()
	for i, v := range r.Values {
		switch {
		case r.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && v == 0:
			errs = append(errs, field.Invalid(vp.Index(i), v, "must not be 0 for the In operator"))
		case seen.Has(v):
			errs = append(errs, field.Duplicate(vp.Index(i), v))
		case i > 0 && v < r.Values[i-1]:
			errs = append(errs, field.Invalid(vp.Index(i), v, "must be ordered"))
		}
		seen.Insert(v)
	}
	return errs
}

// jobUpdate refuses changes to what Kubernetes makes immutable: the selector, the completion
// mode, the pod failure policy, the completions (except with parallelism in an Indexed Job),
// and the template (except while a suspended Job has never started).
func jobUpdate(n, o *batchv1.Job) field.ErrorList {
	errs := metaUpdate(&n.ObjectMeta, &o.ObjectMeta)
	errs = append(errs, immutable(n.Spec.Selector, o.Spec.Selector, specPath.Child("selector"))...)
	errs = append(errs, immutable(n.Spec.CompletionMode, o.Spec.CompletionMode, specPath.Child("completionMode"))...)
	errs = append(errs, immutable(n.Spec.PodFailurePolicy, o.Spec.PodFailurePolicy, specPath.Child("podFailurePolicy"))...)
	errs = append(errs, immutable(n.Spec.ManagedBy, o.Spec.ManagedBy, specPath.Child("managedBy"))...)
	if !apiequality.Semantic.DeepEqual(n.Spec.Completions, o.Spec.Completions) {
		elastic := n.Spec.CompletionMode != nil && *n.Spec.CompletionMode == batchv1.IndexedCompletion &&
			n.Spec.Completions != nil && n.Spec.Parallelism != nil && *n.Spec.Completions == *n.Spec.Parallelism
		if !elastic {
			errs = append(errs, field.Invalid(specPath.Child("completions"), n.Spec.Completions, apivalidation.FieldImmutableErrorMsg))
		}
	}
	neverStarted := o.Spec.Suspend != nil && *o.Spec.Suspend && o.Status.StartTime == nil
	if !neverStarted && !semanticallyEqual(&n.Spec.Template, &o.Spec.Template) {
		errs = append(errs, field.Invalid(specPath.Child("template"), field.OmitValueType{}, apivalidation.FieldImmutableErrorMsg))
	}
	return errs
}

// CronJob validates a CronJob as kube-apiserver's ValidateCronJob does: the schedule parses
// as a standard cron expression, the time zone is a real one, and the job template is valid.
func CronJob(cj *batchv1.CronJob) field.ErrorList {
	return cronJob(cj, false)
}

func cronJob(cj *batchv1.CronJob, allowTZInSchedule bool) field.ErrorList {
	errs := objectMeta(&cj.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	if len(cj.Name) > maxCronJobNameLength {
		errs = append(errs, field.Invalid(metadataPath.Child("name"), cj.Name, fmt.Sprintf("must be no more than %d characters", maxCronJobNameLength)))
	}
	s := &cj.Spec
	if s.Schedule == "" {
		errs = append(errs, field.Required(specPath.Child("schedule"), ""))
	} else {
		errs = append(errs, schedule(s.Schedule, s.TimeZone, allowTZInSchedule, specPath.Child("schedule"))...)
	}
	if s.TimeZone != nil {
		errs = append(errs, timeZone(*s.TimeZone, specPath.Child("timeZone"))...)
	}
	errs = append(errs, oneOf(s.ConcurrencyPolicy, specPath.Child("concurrencyPolicy"),
		batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent)...)
	for name, v := range map[string]*int32{"successfulJobsHistoryLimit": s.SuccessfulJobsHistoryLimit, "failedJobsHistoryLimit": s.FailedJobsHistoryLimit} {
		if v != nil {
			errs = append(errs, nonNegative(int64(*v), specPath.Child(name))...)
		}
	}
	if s.StartingDeadlineSeconds != nil {
		errs = append(errs, nonNegative(*s.StartingDeadlineSeconds, specPath.Child("startingDeadlineSeconds"))...)
	}
	jp := specPath.Child("jobTemplate")
	errs = append(errs, labelMap(s.JobTemplate.Labels, jp.Child("metadata", "labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(s.JobTemplate.Annotations, jp.Child("metadata", "annotations"))...)
	return append(errs, jobSpec(&s.JobTemplate.Spec, jp.Child("spec"), true)...)
}

// schedule parses a cron expression with the parser the CronJob controller uses.
func schedule(v string, tz *string, allowTZ bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if _, err := cron.ParseStandard(v); err != nil {
		errs = append(errs, field.Invalid(p, v, err.Error()))
	}
	switch {
	case allowTZ && strings.Contains(v, "TZ") && tz != nil:
		errs = append(errs, field.Invalid(p, v, "cannot use both timeZone field and TZ or CRON_TZ in schedule"))
	case !allowTZ && strings.Contains(v, "TZ"):
		errs = append(errs, field.Invalid(p, v, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
	}
	return errs
}

func timeZone(tz string, p *field.Path) field.ErrorList {
	switch {
	case tz == "":
		return field.ErrorList{field.Invalid(p, tz, "timeZone must be nil or non-empty string")}
	case strings.EqualFold(tz, "Local"):
		return field.ErrorList{field.Invalid(p, tz, "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones")}
	}
	if _, err := time.LoadLocation(tz); err != nil {
		return field.ErrorList{field.Invalid(p, tz, err.Error())}
	}
	return nil
}

// cronJobUpdate validates an update; a schedule that already carried TZ or CRON_TZ (written
// before the timeZone field) may keep it, as in Kubernetes.
func cronJobUpdate(n, o *batchv1.CronJob) field.ErrorList {
	errs := cronJob(n, strings.Contains(o.Spec.Schedule, "TZ"))
	return append(errs, metaUpdate(&n.ObjectMeta, &o.ObjectMeta)...)
}
