package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/echoapp"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

func jobManifest(name, spec string, args ...string) string {
	return fmt.Sprintf("\napiVersion: batch/v1\nkind: Job\nmetadata: {name: %s}\nspec:\n%s\n", name, spec) + jobPodTemplate("  ", args...)
}

// jobPodTemplate is a Job's pod template, each line indented by indent: one httpecho
// container run with args, never restarted.
func jobPodTemplate(indent string, args ...string) string {
	t := fmt.Sprintf(`template:
  spec:
    restartPolicy: Never
    terminationGracePeriodSeconds: 1
    containers:
    - name: work
      image: %s
      args: ["%s"]
`, echoapp.Image, strings.Join(args, `", "`))
	return indent + strings.ReplaceAll(strings.TrimSuffix(t, "\n"), "\n", "\n"+indent) + "\n"
}

// Jobs on a real node, their pods run by containerd: 5 completions two at a time end
// Complete; a pod failing each time stops the Job at its backoffLimit (BackoffLimitExceeded);
// an Indexed Job's processes each see their own index (JOB_COMPLETION_INDEX, written by the
// process to its termination message).
func jobsRun(t *testing.T, n *node) {
	start := time.Now()
	n.apply(t, jobManifest("work", "  completions: 5\n  parallelism: 2", "-exit-after=300ms")+"---"+
		jobManifest("flaky", "  backoffLimit: 1", "-exit-after=100ms", "-exit-code=1")+"---"+
		jobManifest("idx", "  completions: 3\n  parallelism: 3\n  completionMode: Indexed", "-append=/dev/termination-log=$(JOB_COMPLETION_INDEX)"))

	maxActive := 0
	var work, flaky, idx *batchv1.Job
	testutil.Eventually(t, 120*time.Second, 100*time.Millisecond, func() error {
		active := 0
		for _, p := range n.pods(t, "batch.kubernetes.io/job-name=work") {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				active++
			}
		}
		maxActive = max(maxActive, active)
		work, flaky, idx = getJob(t, n, "work"), getJob(t, n, "flaky"), getJob(t, n, "idx")
		for _, j := range []*batchv1.Job{work, flaky, idx} {
			if jobCondition(j, batchv1.JobComplete) == nil && jobCondition(j, batchv1.JobFailed) == nil {
				return fmt.Errorf("job %s not finished: %+v", j.Name, j.Status)
			}
		}
		return nil
	})
	t.Logf("three jobs finished in %s", elapsed(start))
	if pods := n.pods(t, "batch.kubernetes.io/job-name=work"); maxActive > 2 || maxActive == 0 || len(pods) != 5 {
		t.Errorf("%d of work's %d pods active at once, parallelism is 2; its pods' events: %q", maxActive, len(pods), podEventsOf(t, n, "work"))
	}
	if c := jobCondition(work, batchv1.JobComplete); c == nil || work.Status.Succeeded != 5 || work.Status.Failed != 0 ||
		jobCondition(work, batchv1.JobSuccessCriteriaMet) == nil || work.Status.CompletionTime == nil {
		t.Errorf("work: conditions %+v status %+v", work.Status.Conditions, work.Status)
	}
	if c := jobCondition(flaky, batchv1.JobFailed); c == nil || c.Reason != batchv1.JobReasonBackoffLimitExceeded || flaky.Status.Failed != 2 {
		t.Errorf("flaky: conditions %+v failed %d, want BackoffLimitExceeded after 2", flaky.Status.Conditions, flaky.Status.Failed)
	}
	if jobCondition(idx, batchv1.JobComplete) == nil || idx.Status.CompletedIndexes != "0-2" {
		t.Errorf("idx: conditions %+v completedIndexes %q", idx.Status.Conditions, idx.Status.CompletedIndexes)
	}
	pods := n.pods(t, "batch.kubernetes.io/job-name=idx")
	if len(pods) != 3 {
		t.Errorf("idx has %d pods, want 3", len(pods))
	}
	for _, p := range pods {
		ix := p.Annotations[batchv1.JobCompletionIndexAnnotation]
		term := p.Status.ContainerStatuses[0].State.Terminated
		if term == nil || strings.TrimSpace(term.Message) != ix {
			t.Errorf("pod %s of index %s: the process saw %+v", p.Name, ix, term)
		}
	}
}

// podEventsOf is what the controller of the named owner said about its pods (creates and
// deletes, in order): how a pod count went wrong.
func podEventsOf(t *testing.T, n *node, owner string) []string {
	t.Helper()
	var out []string
	for _, reason := range []string{"SuccessfulCreate", "SuccessfulDelete", "FailedCreate", "FailedDelete"} {
		for _, ev := range eventsWithReason(t, n, reason) {
			if strings.HasPrefix(ev, owner+": ") {
				out = append(out, reason+" "+ev)
			}
		}
	}
	return out
}

func getJob(t *testing.T, n *node, name string) *batchv1.Job {
	t.Helper()
	return getInDefault[*batchv1.Job](t, n, "batch", "jobs", name)
}

// getInDefault reads the named object of a v1 resource in default.
func getInDefault[T runtime.Object](t *testing.T, n *node, group, resource, name string) T {
	t.Helper()
	k, _ := schemas.ByResource(group, "v1", resource)
	o, err := n.cp.Client.Get(context.Background(), k, "default", name)
	if err != nil {
		t.Fatal(err)
	}
	return o.(T)
}

func jobCondition(j *batchv1.Job, typ batchv1.JobConditionType) *batchv1.JobCondition {
	for i, c := range j.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}
