package cronjob_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controllers/cronjob"
	"github.com/skiff-sh/skiff/actors/controlplane"
)

func newCronJob(name, schedule string, mutate func(*batchv1.CronJob)) *batchv1.CronJob {
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: batchv1.CronJobSpec{
			Schedule: schedule,
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				Template: ct.Template(name, "img:1"),
			}},
		},
	}
	cj.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	if mutate != nil {
		mutate(cj)
	}
	return cj
}

// jobs lists the CronJob's Jobs, oldest schedule first.
func jobs(t *testing.T, cp *controlplane.ControlPlane, cj *batchv1.CronJob) []*batchv1.Job {
	t.Helper()
	objs, _, err := cp.Client.List(context.Background(), controllerkit.MustKind("batch", "jobs"), "default", nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []*batchv1.Job
	for _, o := range objs {
		if j := o.(*batchv1.Job); controllerkit.IsOwnedBy(j, cj) && j.DeletionTimestamp == nil {
			out = append(out, j)
		}
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Name < out[k].Name })
	return out
}

func names(js []*batchv1.Job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.Name
	}
	return out
}

// finishJob plays the Job controller: the Job ends with the given terminal condition.
func finishJob(t *testing.T, cp *controlplane.ControlPlane, name string, typ batchv1.JobConditionType, at time.Time) {
	t.Helper()
	ct.Wait(t, func() error {
		j, err := ct.TryGet[*batchv1.Job](cp, "batch", "jobs", "default", name)
		if err != nil {
			return err
		}
		ts := metav1.NewTime(at)
		j.Status.StartTime = &ts
		interim := batchv1.JobSuccessCriteriaMet
		if typ == batchv1.JobFailed {
			interim = batchv1.JobFailureTarget
		} else {
			j.Status.CompletionTime = &ts
			j.Status.Succeeded = 1
		}
		for _, c := range []batchv1.JobConditionType{interim, typ} {
			j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: ts, Reason: "Test"})
		}
		_, err = cp.Client.UpdateStatus(context.Background(), j)
		return err
	})
}

// TestSchedulesForbidsAndPrunesHistory drives the controller's clock a minute at a time.
func TestSchedulesForbidsAndPrunesHistory(t *testing.T) {
	cp := ct.Start(t)
	ctx := ct.Ctx(t)
	fake := clocktesting.NewFakeClock(time.Now())
	ct.Spawn(t, cp, "cronjob", cronjob.New(cronjob.Config{Informers: cp.Informers, Client: cp.Client, Clock: fake}))
	created, err := cp.Client.Create(ctx, newCronJob("tick", "* * * * *", func(cj *batchv1.CronJob) {
		cj.Spec.ConcurrencyPolicy = batchv1.ForbidConcurrent
		cj.Spec.SuccessfulJobsHistoryLimit = ptr.To(int32(2))
		cj.Spec.FailedJobsHistoryLimit = ptr.To(int32(1))
	}))
	if err != nil {
		t.Fatal(err)
	}
	cj := created.(*batchv1.CronJob)
	// nextMinute steps the clock past the next schedule time and returns that time.
	nextMinute := func() time.Time {
		next := fake.Now().Truncate(time.Minute).Add(time.Minute)
		fake.SetTime(next.Add(time.Second))
		return next
	}
	expectJob := func(scheduled time.Time) *batchv1.Job {
		t.Helper()
		want := fmt.Sprintf("tick-%d", scheduled.Unix()/60)
		var found *batchv1.Job
		ct.Wait(t, func() error {
			for _, j := range jobs(t, cp, cj) {
				if j.Name == want {
					found = j
					return nil
				}
			}
			return ct.Errorf("no job %s: %v", want, names(jobs(t, cp, cj)))
		})
		if ts := found.Annotations[batchv1.CronJobScheduledTimestampAnnotation]; ts != scheduled.UTC().Format(time.RFC3339) {
			t.Fatalf("scheduled-timestamp annotation %q", ts)
		}
		if found.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel] != string(found.UID) {
			t.Fatalf("job %s has no generated selector: %+v", found.Name, found.Spec.Selector)
		}
		return found
	}

	first := nextMinute()
	j1 := expectJob(first)
	ct.Wait(t, func() error {
		cur := ct.Get[*batchv1.CronJob](t, cp, "batch", "cronjobs", "default", "tick")
		if len(cur.Status.Active) != 1 || cur.Status.Active[0].UID != j1.UID || cur.Status.LastScheduleTime == nil || !cur.Status.LastScheduleTime.Time.Equal(first) {
			return ct.Errorf("status %+v", cur.Status)
		}
		return nil
	})

	// Forbid: the next minute comes while the first Job runs; nothing new starts.
	second := nextMinute()
	ct.WaitEvent(t, cp, "tick", "JobAlreadyActive", cronjob.Name)
	if js := jobs(t, cp, cj); len(js) != 1 {
		t.Fatalf("forbid started another job: %v", names(js))
	}
	// Once it finishes, the missed minute starts (no starting deadline).
	finishJob(t, cp, j1.Name, batchv1.JobComplete, fake.Now())
	j2 := expectJob(second)
	finishJob(t, cp, j2.Name, batchv1.JobComplete, fake.Now())
	for range 2 {
		j := expectJob(nextMinute())
		finishJob(t, cp, j.Name, batchv1.JobComplete, fake.Now())
	}
	// Four succeeded; the history keeps the newest two.
	ct.Wait(t, func() error {
		js := jobs(t, cp, cj)
		if len(js) != 2 || js[0].Name == j1.Name || js[0].Name == j2.Name {
			return ct.Errorf("jobs %v, want the newest 2 of 4", names(js))
		}
		return nil
	})
	for range 2 {
		j := expectJob(nextMinute())
		finishJob(t, cp, j.Name, batchv1.JobFailed, fake.Now())
	}
	ct.Wait(t, func() error {
		var failed int
		for _, j := range jobs(t, cp, cj) {
			for _, c := range j.Status.Conditions {
				if c.Type == batchv1.JobFailed {
					failed++
				}
			}
		}
		if failed != 1 {
			return ct.Errorf("%d failed jobs kept, limit 1", failed)
		}
		return nil
	})
	ct.Wait(t, func() error {
		cur := ct.Get[*batchv1.CronJob](t, cp, "batch", "cronjobs", "default", "tick")
		if cur.Status.LastSuccessfulTime == nil || len(cur.Status.Active) != 0 {
			return ct.Errorf("status %+v", cur.Status)
		}
		return nil
	})
}

func TestSuspendAndStartingDeadline(t *testing.T) {
	cp := ct.Start(t)
	ctx := ct.Ctx(t)
	fake := clocktesting.NewFakeClock(time.Now())
	ct.Spawn(t, cp, "cronjob", cronjob.New(cronjob.Config{Informers: cp.Informers, Client: cp.Client, Clock: clock.WithDelayedExecution(fake)}))
	created, err := cp.Client.Create(ctx, newCronJob("late", "* * * * *", func(cj *batchv1.CronJob) {
		cj.Spec.StartingDeadlineSeconds = ptr.To(int64(10))
		cj.Spec.Suspend = ptr.To(true)
	}))
	if err != nil {
		t.Fatal(err)
	}
	cj := created.(*batchv1.CronJob)
	// Suspended across a schedule time, then resumed 30 s after it: past the 10 s deadline.
	fake.SetTime(fake.Now().Truncate(time.Minute).Add(time.Minute + 30*time.Second))
	ct.Wait(t, func() error {
		cur := ct.Get[*batchv1.CronJob](t, cp, "batch", "cronjobs", "default", "late")
		cur.Spec.Suspend = ptr.To(false)
		_, err := cp.Client.Update(ctx, cur)
		return err
	})
	// The next schedule time is on time: it alone starts. Its Job sets lastScheduleTime, so
	// the missed one can no more start after it than before.
	next := fake.Now().Truncate(time.Minute).Add(time.Minute)
	fake.SetTime(next.Add(2 * time.Second))
	ct.Wait(t, func() error {
		if js := jobs(t, cp, cj); len(js) != 1 || js[0].Name != fmt.Sprintf("late-%d", next.Unix()/60) {
			return ct.Errorf("jobs %v, want only the on-time one", names(js))
		}
		return nil
	})
}

func TestInvalidScheduleIs422(t *testing.T) {
	cp := ct.Start(t)
	ctx := ct.Ctx(t)
	for _, tc := range []struct {
		cj    *batchv1.CronJob
		field string
	}{
		{newCronJob("bad", "every minute", nil), "spec.schedule"},
		{newCronJob("bad", "61 * * * *", nil), "spec.schedule"},
		{newCronJob("bad", "CRON_TZ=UTC * * * * *", nil), "spec.schedule"},
		{newCronJob("bad", "* * * * *", func(cj *batchv1.CronJob) { cj.Spec.TimeZone = ptr.To("Mars/Olympus") }), "spec.timeZone"},
		{newCronJob("bad", "* * * * *", func(cj *batchv1.CronJob) { cj.Spec.ConcurrencyPolicy = "Sometimes" }), "spec.concurrencyPolicy"},
		{newCronJob("bad", "* * * * *", func(cj *batchv1.CronJob) {
			cj.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		}), "spec.jobTemplate.spec.template.spec.restartPolicy"},
	} {
		_, err := cp.Client.Create(ctx, tc.cj)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("schedule %q: got %v, want 422 naming %s", tc.cj.Spec.Schedule, err, tc.field)
		}
	}
	if _, err := ct.TryGet[*batchv1.CronJob](cp, "batch", "cronjobs", "default", "bad"); !apierrors.IsNotFound(err) {
		t.Fatalf("an invalid CronJob was stored: %v", err)
	}
}

// A Job made by hand from the CronJob (as `kubectl create job --from=cronjob/x` makes it: the
// CronJob its controller) is reported, not adopted, as by kube's controller: it does not hold
// back a Forbid schedule, and a scheduled Job that finishes leaves status.active with an event.
func TestHandMadeJobDoesNotHoldBackForbid(t *testing.T) {
	cp := ct.Start(t)
	ctx := ct.Ctx(t)
	fake := clocktesting.NewFakeClock(time.Now())
	ct.Spawn(t, cp, "cronjob", cronjob.New(cronjob.Config{Informers: cp.Informers, Client: cp.Client, Clock: fake}))
	created, err := cp.Client.Create(ctx, newCronJob("nightly", "* * * * *", func(cj *batchv1.CronJob) {
		cj.Spec.ConcurrencyPolicy = batchv1.ForbidConcurrent
	}))
	if err != nil {
		t.Fatal(err)
	}
	cj := created.(*batchv1.CronJob)
	manual := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly-manual", Namespace: "default",
			Annotations:     map[string]string{"cronjob.kubernetes.io/instantiate": "manual"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, batchv1.SchemeGroupVersion.WithKind("CronJob"))}},
		Spec: *cj.Spec.JobTemplate.Spec.DeepCopy(),
	}
	if _, err := cp.Client.Create(ctx, manual); err != nil {
		t.Fatal(err)
	}
	ct.WaitEvent(t, cp, "nightly", "UnexpectedJob", cronjob.Name)

	next := fake.Now().Truncate(time.Minute).Add(time.Minute)
	fake.SetTime(next.Add(time.Second))
	scheduled := fmt.Sprintf("nightly-%d", next.Unix()/60)
	ct.Wait(t, func() error {
		cur := ct.Get[*batchv1.CronJob](t, cp, "batch", "cronjobs", "default", "nightly")
		if len(cur.Status.Active) != 1 || cur.Status.Active[0].Name != scheduled {
			return ct.Errorf("active %+v, want only %s (the hand-made Job unlisted)", cur.Status.Active, scheduled)
		}
		return nil
	})
	finishJob(t, cp, scheduled, batchv1.JobComplete, fake.Now())
	ct.WaitEvent(t, cp, "nightly", "SawCompletedJob", cronjob.Name)
	ct.Wait(t, func() error {
		cur := ct.Get[*batchv1.CronJob](t, cp, "batch", "cronjobs", "default", "nightly")
		if len(cur.Status.Active) != 0 || cur.Status.LastSuccessfulTime == nil {
			return ct.Errorf("status %+v, want none active and a last success", cur.Status)
		}
		return nil
	})
}
