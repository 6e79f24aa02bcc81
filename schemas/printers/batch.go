package printers

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func init() {
	register("jobs", printer{
		columns: append([]metav1.TableColumnDefinition{nameColumn,
			col("Status", "string", "Status of the job."),
			col("Completions", "string", "The completion status of the job"),
			col("Duration", "string", "Time required to complete the job."),
			ageColumn,
		}, workloadWide...),
		cells: typed(func(j *batchv1.Job, now time.Time) []any {
			return append([]any{j.Name, jobStatus(j), jobCompletions(j), jobDuration(j, now), Age(j.CreationTimestamp, now)},
				workloadCells(j.Spec.Template, j.Spec.Selector)...)
		}),
	})
	register("cronjobs", printer{
		columns: append([]metav1.TableColumnDefinition{nameColumn,
			col("Schedule", "string", "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."),
			col("Timezone", "string", "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones."),
			col("Suspend", "boolean", "This flag tells the controller to suspend subsequent executions."),
			col("Active", "integer", "A list of pointers to currently running jobs."),
			col("Last Schedule", "string", "Information when was the last time the job was successfully scheduled."),
			ageColumn,
		}, workloadWide...),
		cells: typed(func(cj *batchv1.CronJob, now time.Time) []any {
			tz, last := "<none>", "<none>"
			if cj.Spec.TimeZone != nil {
				tz = *cj.Spec.TimeZone
			}
			if cj.Status.LastScheduleTime != nil {
				last = Age(*cj.Status.LastScheduleTime, now)
			}
			suspend := cj.Spec.Suspend != nil && *cj.Spec.Suspend
			return append([]any{cj.Name, cj.Spec.Schedule, tz, boolString(suspend), int64(len(cj.Status.Active)), last,
				Age(cj.CreationTimestamp, now)}, workloadCells(cj.Spec.JobTemplate.Spec.Template, cj.Spec.JobTemplate.Spec.Selector)...)
		}),
	})
}

func boolString(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// jobStatus is kubectl's STATUS: the terminal condition, else what the Job is waiting for.
func jobStatus(j *batchv1.Job) string {
	switch {
	case jobCondition(j, batchv1.JobComplete):
		return "Complete"
	case jobCondition(j, batchv1.JobFailed):
		return "Failed"
	case j.DeletionTimestamp != nil:
		return "Terminating"
	case jobCondition(j, batchv1.JobSuspended):
		return "Suspended"
	case jobCondition(j, batchv1.JobFailureTarget):
		return "FailureTarget"
	case jobCondition(j, batchv1.JobSuccessCriteriaMet):
		return "SuccessCriteriaMet"
	}
	return "Running"
}

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func jobCompletions(j *batchv1.Job) string {
	if j.Spec.Completions != nil {
		return fmt.Sprintf("%d/%d", j.Status.Succeeded, *j.Spec.Completions)
	}
	if p := replicasOf(j.Spec.Parallelism); p > 1 {
		return fmt.Sprintf("%d/1 of %d", j.Status.Succeeded, p)
	}
	return fmt.Sprintf("%d/1", j.Status.Succeeded)
}

func jobDuration(j *batchv1.Job, now time.Time) string {
	switch {
	case j.Status.StartTime == nil:
		return ""
	case j.Status.CompletionTime == nil:
		return HumanDuration(now.Sub(j.Status.StartTime.Time))
	}
	return HumanDuration(j.Status.CompletionTime.Sub(j.Status.StartTime.Time))
}
