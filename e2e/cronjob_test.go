package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

func cronJobManifest(name, spec string, args ...string) string {
	return fmt.Sprintf("\napiVersion: batch/v1\nkind: CronJob\nmetadata: {name: %s}\nspec:\n  schedule: \"*/1 * * * *\"\n%s\n  jobTemplate:\n    spec:\n      backoffLimit: 0\n", name, spec) +
		jobPodTemplate("      ", args...)
}

// CronJobs on a real node, by the wall clock (cron's granularity is the minute, so this waits
// for two schedule times, about two minutes): a Job created at its schedule time runs to
// Complete; with Forbid and a Job that outlasts a minute, the next time starts nothing
// (JobAlreadyActive); the history limits of 1 keep only the newest succeeded and failed Job;
// stock `kubectl create job --from=cronjob/x` starts a Job by hand that runs to Complete.
func cronJobsRunOnSchedule(t *testing.T, n *node) {
	n.apply(t, cronJobManifest("tick", "  successfulJobsHistoryLimit: 1\n  failedJobsHistoryLimit: 1", "-exit-after=200ms")+"---"+
		cronJobManifest("broken", "  failedJobsHistoryLimit: 1", "-exit-after=200ms", "-exit-code=3")+"---"+
		cronJobManifest("slow", "  concurrencyPolicy: Forbid", "-exit-after=150s")+"---"+
		cronJobManifest("byhand", "  suspend: true", "-exit-after=200ms"))
	created := getCronJob(t, n, "tick").CreationTimestamp.Time
	first := created.Truncate(time.Minute).Add(time.Minute)
	second := first.Add(time.Minute)
	t.Logf("created at %s; schedule times %s and %s", created.Format(time.TimeOnly), first.Format(time.TimeOnly), second.Format(time.TimeOnly))

	// By hand, while the clock runs to the first schedule time.
	kubectl := testutil.BuildBinary(t, "./services/kubectl")
	if out, err := kubectlCmd(t, kubectl, n, "create", "job", "byhand-now", "--from=cronjob/byhand").CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "job.batch/byhand-now created") {
		t.Fatalf("kubectl create job --from=cronjob/byhand: %v %q", err, out)
	}
	waitJobFinished(t, n, "byhand-now", batchv1.JobComplete, 90*time.Second)
	if j := getJob(t, n, "byhand-now"); j.Annotations["cronjob.kubernetes.io/instantiate"] != "manual" ||
		metav1.GetControllerOf(j) == nil || metav1.GetControllerOf(j).Name != "byhand" {
		t.Errorf("byhand-now: annotations %v owners %+v", j.Annotations, j.OwnerReferences)
	}

	tick1, broken1, slow1 := scheduledName("tick", first), scheduledName("broken", first), scheduledName("slow", first)
	waitJobFinished(t, n, tick1, batchv1.JobComplete, time.Until(first)+90*time.Second)
	j := getJob(t, n, tick1)
	if ts := j.Annotations[batchv1.CronJobScheduledTimestampAnnotation]; ts != first.UTC().Format(time.RFC3339) {
		t.Errorf("%s: scheduled-timestamp %q, want %s", tick1, ts, first.UTC().Format(time.RFC3339))
	}
	if late := j.CreationTimestamp.Sub(first); late < 0 || late > 10*time.Second {
		t.Errorf("%s created %s after its schedule time", tick1, late)
	}
	pods := n.pods(t, "batch.kubernetes.io/job-name="+tick1)
	if len(pods) != 1 || pods[0].Status.Phase != corev1.PodSucceeded || pods[0].Spec.NodeName != "e2e-node" {
		t.Errorf("%s's pods: %s", tick1, podPhases(pods))
	}
	waitJobFinished(t, n, broken1, batchv1.JobFailed, 60*time.Second)
	if c := jobCondition(getJob(t, n, slow1), batchv1.JobComplete); c != nil {
		t.Fatalf("%s finished before the next schedule time: %+v", slow1, c)
	}

	// The second schedule time: tick and broken run again and their first Jobs are pruned;
	// slow is still running, so Forbid skips the time.
	tick2, broken2 := scheduledName("tick", second), scheduledName("broken", second)
	waitJobFinished(t, n, tick2, batchv1.JobComplete, time.Until(second)+90*time.Second)
	waitJobFinished(t, n, broken2, batchv1.JobFailed, 60*time.Second)
	testutil.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		for cj, want := range map[string][]string{"tick": {tick2}, "broken": {broken2}, "slow": {slow1}} {
			if got := jobsOf(t, n, cj); strings.Join(got, ",") != strings.Join(want, ",") {
				return fmt.Errorf("%s's jobs %v, want %v", cj, got, want)
			}
		}
		if ev := eventsWithReason(t, n, "JobAlreadyActive"); len(ev) == 0 || !strings.HasPrefix(ev[0], "slow: ") {
			return fmt.Errorf("JobAlreadyActive events %q", ev)
		}
		return nil
	})
	if deleted := eventsWithReason(t, n, "SuccessfulDelete"); !slices.Contains(deleted, "tick: Deleted job "+tick1) || !slices.Contains(deleted, "broken: Deleted job "+broken1) {
		t.Errorf("SuccessfulDelete events %q", deleted)
	}
	slow := getCronJob(t, n, "slow")
	if len(slow.Status.Active) != 1 || slow.Status.Active[0].Name != slow1 || !slow.Status.LastScheduleTime.Time.Equal(first) {
		t.Errorf("slow's status %+v", slow.Status)
	}
	t.Logf("two schedule times, Forbid and the history limits checked %s after the CronJobs' creation", elapsed(created))
	// Their Jobs go with them (garbage collector), so the node is quiet for the other subtests.
	if out, err := kubectlCmd(t, kubectl, n, "delete", "cronjob", "tick", "broken", "slow", "byhand").CombinedOutput(); err != nil {
		t.Errorf("kubectl delete cronjob: %v %q", err, out)
	}
}

func scheduledName(cronJob string, at time.Time) string {
	return fmt.Sprintf("%s-%d", cronJob, at.Unix()/60)
}

func getCronJob(t *testing.T, n *node, name string) *batchv1.CronJob {
	t.Helper()
	return getInDefault[*batchv1.CronJob](t, n, "batch", "cronjobs", name)
}

// jobsOf names the Jobs of default that the CronJob controls and are not being deleted.
func jobsOf(t *testing.T, n *node, cronJob string) []string {
	t.Helper()
	k, _ := schemas.ByResource("batch", "v1", "jobs")
	objs, _, err := n.cp.Client.List(context.Background(), k, "default", nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		j := o.(*batchv1.Job)
		if ref := metav1.GetControllerOf(j); ref != nil && ref.Kind == "CronJob" && ref.Name == cronJob && j.DeletionTimestamp == nil {
			out = append(out, j.Name)
		}
	}
	sort.Strings(out)
	return out
}

// waitJobFinished waits for the Job to exist and end with the terminal condition want.
func waitJobFinished(t *testing.T, n *node, name string, want batchv1.JobConditionType, within time.Duration) {
	t.Helper()
	k, _ := schemas.ByResource("batch", "v1", "jobs")
	testutil.Eventually(t, within, 200*time.Millisecond, func() error {
		o, err := n.cp.Client.Get(context.Background(), k, "default", name)
		if err != nil {
			return err
		}
		j := o.(*batchv1.Job)
		if jobCondition(j, want) == nil {
			return fmt.Errorf("job %s not %s: %+v (pods %s)", name, want, j.Status, podPhases(n.pods(t, "batch.kubernetes.io/job-name="+name)))
		}
		return nil
	})
}

func podPhases(pods []*corev1.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name+"="+string(p.Status.Phase)+"@"+p.Spec.NodeName)
	}
	return "[" + strings.Join(out, " ") + "]"
}
