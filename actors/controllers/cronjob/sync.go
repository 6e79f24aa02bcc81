package cronjob

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/informer"
)

// tooManyMissed: past this many missed schedules Kubernetes warns (and starts only the latest).
const tooManyMissed = 100

func (c *controller) sync(ctx context.Context, key string) error {
	ns, name := controllerkit.SplitKey(key)
	o, ok := c.cjs.Get(ns, name)
	if !ok {
		c.stopTimer(key)
		return nil
	}
	jobs := c.ownedJobs(o.(*batchv1.CronJob))
	cj, err := c.withFreshStatus(ctx, o.(*batchv1.CronJob).DeepCopy(), jobs)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	errs := []error{c.reconcileActive(ctx, cj, jobs), c.cleanupHistory(ctx, cj, jobs)}
	if cj.DeletionTimestamp == nil && !(cj.Spec.Suspend != nil && *cj.Spec.Suspend) {
		errs = append(errs, c.schedule(ctx, cj, key))
	}
	errs = append(errs, c.writeStatus(ctx, cj))
	return errors.Join(errs...)
}

// ownedJobs are the Jobs whose controller is cj (by UID, from the controller index).
func (c *controller) ownedJobs(cj *batchv1.CronJob) []*batchv1.Job {
	return informer.Of[*batchv1.Job](c.jobs).ByIndex(informer.IndexControllerUID, string(cj.UID))
}

// reconcileActive brings status.active in line with the owned Jobs, as kube's controller does:
// a finished Job leaves it (SawCompletedJob), a listed Job gone from the API leaves it
// (MissingJob), and an unfinished owned Job it does not list is reported (UnexpectedJob), not
// adopted, so a Job started by hand (`kubectl create job --from=cronjob/x`) does not hold back
// a Forbid schedule. The newest completion is status.lastSuccessfulTime.
func (c *controller) reconcileActive(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) error {
	children := map[types.UID]bool{}
	for _, j := range jobs {
		children[j.UID] = true
		listed := hasRef(cj.Status.Active, j.UID)
		switch {
		case !listed && !finished(j) && j.DeletionTimestamp == nil:
			c.rec.Eventf(ctx, cj, corev1.EventTypeWarning, "UnexpectedJob", "Saw a job that the controller did not create or forgot: %s", j.Name)
		case listed && finished(j):
			cj.Status.Active = withoutRef(cj.Status.Active, j.UID)
			c.rec.Eventf(ctx, cj, corev1.EventTypeNormal, "SawCompletedJob", "Saw completed job: %s, condition: %v", j.Name, finishedCondition(j))
		}
		if t := j.Status.CompletionTime; t != nil && conditionTrue(j, batchv1.JobComplete) {
			if last := cj.Status.LastSuccessfulTime; last == nil || last.Before(t) {
				cj.Status.LastSuccessfulTime = t.DeepCopy()
			}
		}
	}
	for _, ref := range cj.Status.Active {
		if children[ref.UID] {
			continue
		}
		// Not in the cache: created a moment ago, or deleted. Ask the API.
		got, err := c.client.Get(ctx, controllerkit.MustKind("batch", "jobs"), ref.Namespace, ref.Name)
		switch {
		case err == nil && got.(*batchv1.Job).UID == ref.UID:
			continue
		case err != nil && !apierrors.IsNotFound(err):
			return err
		}
		c.rec.Eventf(ctx, cj, corev1.EventTypeNormal, "MissingJob", "Active job went missing: %v", ref.Name)
		cj.Status.Active = withoutRef(cj.Status.Active, ref.UID)
	}
	return nil
}

// withFreshStatus returns the CronJob from the API when the cache's copy may predate one of
// this controller's own status writes (an unfinished owned Job it does not list), so such a
// Job is not mistaken for an unexpected one; else cj.
func (c *controller) withFreshStatus(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) (*batchv1.CronJob, error) {
	for _, j := range jobs {
		if finished(j) || j.DeletionTimestamp != nil || hasRef(cj.Status.Active, j.UID) {
			continue
		}
		got, err := c.client.Get(ctx, controllerkit.MustKind("batch", "cronjobs"), cj.Namespace, cj.Name)
		if err != nil {
			return nil, err
		}
		return got.(*batchv1.CronJob), nil
	}
	return cj, nil
}

// schedule starts the Job of the latest schedule time that has come, if it is still due, and
// sets the wake-up for the next one.
func (c *controller) schedule(ctx context.Context, cj *batchv1.CronJob, key string) error {
	if tz := cj.Spec.TimeZone; tz != nil {
		if _, err := time.LoadLocation(*tz); err != nil {
			// Validation checked it against the apiserver's zone database; this one lacks it.
			c.rec.Eventf(ctx, cj, corev1.EventTypeWarning, "UnknownTimeZone", "invalid timeZone: %q: %s", *tz, err)
			return nil
		}
	}
	sched, loc, err := parseSchedule(cj)
	if err != nil {
		c.rec.Eventf(ctx, cj, corev1.EventTypeWarning, "UnparseableSchedule", "unparseable schedule: %q : %s", cj.Spec.Schedule, err)
		return nil // validation refuses these; retrying cannot help
	}
	now := c.clock.Now()
	defer func() { c.wakeAt(key, sched.Next(now).Add(100*time.Millisecond)) }()
	scheduled, missed := mostRecentScheduleTime(cj, now, sched)
	if scheduled == nil {
		return nil
	}
	if missed > tooManyMissed {
		c.rec.Eventf(ctx, cj, corev1.EventTypeWarning, "TooManyMissedTimes",
			"too many missed start times: %d. Set or decrease .spec.startingDeadlineSeconds or check clock skew", missed)
	}
	if sds := cj.Spec.StartingDeadlineSeconds; sds != nil && scheduled.Add(time.Duration(*sds)*time.Second).Before(now) {
		c.rec.Eventf(ctx, cj, corev1.EventTypeWarning, "MissSchedule", "Missed scheduled time to start a job: %s", scheduled.UTC().Format(time.RFC1123Z))
		return nil
	}
	if hasName(cj.Status.Active, jobName(cj.Name, *scheduled)) || cj.Status.LastScheduleTime.Equal(&metav1.Time{Time: *scheduled}) {
		return nil // this schedule time is processed
	}
	switch cj.Spec.ConcurrencyPolicy {
	case batchv1.ForbidConcurrent:
		if len(cj.Status.Active) > 0 {
			c.rec.Eventf(ctx, cj, corev1.EventTypeNormal, "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid")
			return nil
		}
	case batchv1.ReplaceConcurrent:
		for _, ref := range cj.Status.Active {
			if err := c.deleteJob(ctx, cj, ref.Namespace, ref.Name, ref.UID); err != nil {
				return err
			}
		}
		cj.Status.Active = nil
	}
	return c.startJob(ctx, cj, *scheduled, loc)
}

func (c *controller) startJob(ctx context.Context, cj *batchv1.CronJob, scheduled time.Time, loc *time.Location) error {
	out, err := c.client.Create(ctx, jobFromTemplate(cj, scheduled, loc))
	switch {
	case apierrors.IsAlreadyExists(err):
		// Created by an earlier attempt whose status write was lost: list it now. Another's
		// Job of that name is left alone, as kube's controller does.
		got, gerr := c.client.Get(ctx, controllerkit.MustKind("batch", "jobs"), cj.Namespace, jobName(cj.Name, scheduled))
		if gerr != nil {
			return gerr
		}
		if !controllerkit.IsOwnedBy(got.(*batchv1.Job), cj) {
			return nil
		}
		out = got
	case err != nil:
		c.rec.Eventf(ctx, cj, corev1.EventTypeWarning, "FailedCreate", "Error creating job: %v", err)
		return err
	default:
		c.rec.Eventf(ctx, cj, corev1.EventTypeNormal, "SuccessfulCreate", "Created job %v", out.(*batchv1.Job).Name)
	}
	j := out.(*batchv1.Job)
	if !hasRef(cj.Status.Active, j.UID) {
		cj.Status.Active = append(cj.Status.Active, jobRef(j))
	}
	cj.Status.LastScheduleTime = &metav1.Time{Time: scheduled}
	return nil
}

// cleanupHistory deletes the oldest finished Jobs beyond the history limits.
func (c *controller) cleanupHistory(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) error {
	var ok, failed []*batchv1.Job
	for _, j := range jobs {
		switch {
		case j.DeletionTimestamp != nil:
		case conditionTrue(j, batchv1.JobComplete):
			ok = append(ok, j)
		case conditionTrue(j, batchv1.JobFailed):
			failed = append(failed, j)
		}
	}
	var errs []error
	for _, h := range []struct {
		jobs  []*batchv1.Job
		limit *int32
	}{{ok, cj.Spec.SuccessfulJobsHistoryLimit}, {failed, cj.Spec.FailedJobsHistoryLimit}} {
		if h.limit == nil || len(h.jobs) <= int(*h.limit) {
			continue
		}
		sort.Slice(h.jobs, func(a, b int) bool { return olderJob(h.jobs[a], h.jobs[b]) })
		for _, j := range h.jobs[:len(h.jobs)-int(*h.limit)] {
			errs = append(errs, c.deleteJob(ctx, cj, j.Namespace, j.Name, j.UID))
		}
	}
	return errors.Join(errs...)
}

func olderJob(a, b *batchv1.Job) bool {
	ta, tb := a.CreationTimestamp, b.CreationTimestamp
	if a.Status.StartTime != nil && b.Status.StartTime != nil {
		ta, tb = *a.Status.StartTime, *b.Status.StartTime
	}
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	return a.Name < b.Name
}

// deleteJob deletes a Job with its pods (background propagation), only that incarnation.
func (c *controller) deleteJob(ctx context.Context, cj *batchv1.CronJob, ns, name string, uid types.UID) error {
	policy := metav1.DeletePropagationBackground
	err := c.client.Delete(ctx, controllerkit.MustKind("batch", "jobs"), ns, name,
		&metav1.DeleteOptions{PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		c.rec.Eventf(ctx, cj, corev1.EventTypeWarning, "FailedDelete", "Deleted job: %v", err)
		return err
	}
	c.rec.Eventf(ctx, cj, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted job %v", name)
	return nil
}

func (c *controller) writeStatus(ctx context.Context, cj *batchv1.CronJob) error {
	if o, ok := c.cjs.Get(cj.Namespace, cj.Name); ok && apiequality.Semantic.DeepEqual(o.(*batchv1.CronJob).Status, cj.Status) {
		return nil
	}
	_, err := c.client.UpdateStatus(ctx, cj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// parseSchedule parses spec.schedule as a standard cron expression in spec.timeZone (else the
// schedule's own CRON_TZ/TZ prefix, else UTC as kube-controller-manager runs).
func parseSchedule(cj *batchv1.CronJob) (cron.Schedule, *time.Location, error) {
	loc := time.UTC
	expr := cj.Spec.Schedule
	if tz := cj.Spec.TimeZone; tz != nil {
		l, err := time.LoadLocation(*tz)
		if err != nil {
			return nil, nil, err
		}
		loc, expr = l, "CRON_TZ="+*tz+" "+expr
	}
	s, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, nil, err
	}
	if spec, ok := s.(*cron.SpecSchedule); ok {
		loc = spec.Location
	}
	return s, loc, nil
}

// mostRecentScheduleTime is the latest schedule time in (earliest, now], where earliest is
// the last schedule (else the creation), no further back than the starting deadline; and how
// many were missed.
func mostRecentScheduleTime(cj *batchv1.CronJob, now time.Time, sched cron.Schedule) (*time.Time, int) {
	earliest := cj.CreationTimestamp.Time
	if t := cj.Status.LastScheduleTime; t != nil {
		earliest = t.Time
	}
	if sds := cj.Spec.StartingDeadlineSeconds; sds != nil {
		if d := now.Add(-time.Duration(*sds) * time.Second); d.After(earliest) {
			earliest = d
		}
	}
	var latest *time.Time
	n := 0
	for t := sched.Next(earliest); !t.IsZero() && !t.After(now); t = sched.Next(t) {
		latest = &t
		n++
	}
	return latest, n
}

// jobName is <cronjob>-<scheduled time in minutes since the epoch>, as Kubernetes names them:
// one name per schedule time, so a retried create cannot start a schedule twice.
func jobName(cronJob string, scheduled time.Time) string {
	return fmt.Sprintf("%s-%d", cronJob, scheduled.Unix()/60)
}

func jobFromTemplate(cj *batchv1.CronJob, scheduled time.Time, loc *time.Location) *batchv1.Job {
	t := &cj.Spec.JobTemplate
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            jobName(cj.Name, scheduled),
			Namespace:       cj.Namespace,
			Labels:          map[string]string{},
			Annotations:     map[string]string{batchv1.CronJobScheduledTimestampAnnotation: scheduled.In(loc).Format(time.RFC3339)},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, gvk)},
		},
		Spec: *t.Spec.DeepCopy(),
	}
	for k, v := range t.Labels {
		j.Labels[k] = v
	}
	for k, v := range t.Annotations {
		j.Annotations[k] = v
	}
	return j
}

func jobRef(j *batchv1.Job) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1", Namespace: j.Namespace, Name: j.Name,
		UID: j.UID, ResourceVersion: j.ResourceVersion}
}

func withoutRef(refs []corev1.ObjectReference, uid types.UID) []corev1.ObjectReference {
	var out []corev1.ObjectReference
	for _, r := range refs {
		if r.UID != uid {
			out = append(out, r)
		}
	}
	return out
}

func hasName(refs []corev1.ObjectReference, name string) bool {
	for _, r := range refs {
		if r.Name == name {
			return true
		}
	}
	return false
}

func hasRef(refs []corev1.ObjectReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid {
			return true
		}
	}
	return false
}

func finished(j *batchv1.Job) bool { return finishedCondition(j) != "" }

// finishedCondition is the Job's terminal condition (Complete or Failed), else "".
func finishedCondition(j *batchv1.Job) batchv1.JobConditionType {
	for _, t := range []batchv1.JobConditionType{batchv1.JobComplete, batchv1.JobFailed} {
		if conditionTrue(j, t) {
			return t
		}
	}
	return ""
}

func conditionTrue(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
