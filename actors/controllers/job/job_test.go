package job_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controllers/job"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/simnode"
)

// setup runs the Job controller with a short failure backoff against a real control plane
// with two simulated nodes, which report every bound pod Running; the tests decide how each
// pod ends.
func setup(t *testing.T) (*controlplane.ControlPlane, context.Context) {
	cp := ct.Start(t)
	ct.Spawn(t, cp, "job", job.New(job.Config{Informers: cp.Informers, Client: cp.Client, Backoff: 20 * time.Millisecond}))
	ct.Spawn(t, cp, "simnode", simnode.New(simnode.Config{Log: cp.Log, Client: cp.Client, Nodes: 2}))
	ct.Binder(t, cp)
	return cp, ct.Ctx(t)
}

func newJob(name string, mutate func(*batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       batchv1.JobSpec{Template: ct.Template(name, "img:1")},
	}
	j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	if mutate != nil {
		mutate(j)
	}
	return j
}

func jobPods(t *testing.T, cp *controlplane.ControlPlane, j *batchv1.Job) []*corev1.Pod {
	return ct.ListPods(t, cp, "default", batchv1.ControllerUidLabel+"="+string(j.UID))
}

// running returns the job's pods that simnode reports Running and nobody has ended yet.
func running(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Name < out[k].Name })
	return out
}

// end finishes a pod the way a kubelet reports it: phase, and the container's exit code.
func end(t *testing.T, cp *controlplane.ControlPlane, p *corev1.Pod, phase corev1.PodPhase, exitCode int32) {
	t.Helper()
	ct.Wait(t, func() error {
		cur, err := ct.TryGet[*corev1.Pod](cp, "", "pods", p.Namespace, p.Name)
		if err != nil {
			return err
		}
		cur.Status.Phase = phase
		now := metav1.Now()
		for i := range cur.Status.ContainerStatuses {
			s := &cur.Status.ContainerStatuses[i]
			s.Ready = false
			s.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, FinishedAt: now}}
		}
		_, err = cp.Client.UpdateStatus(context.Background(), cur)
		return err
	})
}

func waitJob(t *testing.T, cp *controlplane.ControlPlane, name string, ok func(*batchv1.Job) error) *batchv1.Job {
	t.Helper()
	var j *batchv1.Job
	ct.Wait(t, func() error {
		j = ct.Get[*batchv1.Job](t, cp, "batch", "jobs", "default", name)
		return ok(j)
	})
	return j
}

func condition(j *batchv1.Job, typ batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		if c := &j.Status.Conditions[i]; c.Type == typ && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

func finishedWith(typ batchv1.JobConditionType) func(*batchv1.Job) error {
	return func(j *batchv1.Job) error {
		if condition(j, typ) == nil {
			return ct.Errorf("no %s condition yet: %+v", typ, j.Status)
		}
		return nil
	}
}

func TestCompletionsWithParallelism(t *testing.T) {
	cp, ctx := setup(t)
	// Count the job's active pods after every change of any pod, in log order.
	iv := ct.WatchInvariant(t, cp, "", "pods", func(objs []runtime.Object) error {
		n := 0
		for _, o := range objs {
			if p := o.(*corev1.Pod); strings.HasPrefix(p.Name, "work-") && controllerkit.IsPodActive(p) {
				n++
			}
		}
		if n > 2 {
			return fmt.Errorf("%d active pods, parallelism is 2", n)
		}
		return nil
	})
	iv.Start()
	created, err := cp.Client.Create(ctx, newJob("work", func(j *batchv1.Job) {
		j.Spec.Completions, j.Spec.Parallelism = ptr.To(int32(5)), ptr.To(int32(2))
	}))
	if err != nil {
		t.Fatal(err)
	}
	j := created.(*batchv1.Job)
	for done := 0; done < 5; done++ {
		var p *corev1.Pod
		ct.Wait(t, func() error {
			rs := running(jobPods(t, cp, j))
			if len(rs) == 0 {
				return ct.Errorf("no running pod")
			}
			p = rs[0]
			return nil
		})
		end(t, cp, p, corev1.PodSucceeded, 0)
	}
	j = waitJob(t, cp, "work", finishedWith(batchv1.JobComplete))
	violations, changes := iv.Stop()
	if len(violations) > 0 {
		t.Fatalf("parallelism exceeded: %v", violations)
	}
	t.Logf("active pods checked after %d pod changes", changes)
	if j.Status.Succeeded != 5 || j.Status.Failed != 0 || j.Status.Active != 0 || j.Status.CompletionTime == nil || j.Status.StartTime == nil {
		t.Fatalf("status %+v", j.Status)
	}
	if u := j.Status.UncountedTerminatedPods; u != nil && len(u.Succeeded)+len(u.Failed) > 0 {
		t.Fatalf("uncounted pods left: %+v", u)
	}
	if c := condition(j, batchv1.JobSuccessCriteriaMet); c == nil || c.Reason != batchv1.JobReasonCompletionsReached {
		t.Fatalf("no SuccessCriteriaMet condition: %+v", j.Status.Conditions)
	}
	// Every pod's result was counted, so none keeps the tracking finalizer.
	pods := jobPods(t, cp, j)
	if len(pods) != 5 {
		t.Fatalf("%d pods, want 5", len(pods))
	}
	ct.Wait(t, func() error {
		for _, p := range jobPods(t, cp, j) {
			if len(p.Finalizers) > 0 {
				return ct.Errorf("pod %s keeps %v", p.Name, p.Finalizers)
			}
		}
		return nil
	})
}

func TestBackoffLimitExceeded(t *testing.T) {
	cp, ctx := setup(t)
	created, err := cp.Client.Create(ctx, newJob("flaky", func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr.To(int32(2)) }))
	if err != nil {
		t.Fatal(err)
	}
	j := created.(*batchv1.Job)
	failedPods := map[string]bool{}
	for len(failedPods) < 3 {
		ct.Wait(t, func() error {
			for _, p := range running(jobPods(t, cp, j)) {
				if !failedPods[p.Name] {
					failedPods[p.Name] = true
					end(t, cp, p, corev1.PodFailed, 1)
					return nil
				}
			}
			return ct.Errorf("no new running pod after %d failures", len(failedPods))
		})
	}
	j = waitJob(t, cp, "flaky", finishedWith(batchv1.JobFailed))
	c := condition(j, batchv1.JobFailed)
	if c.Reason != batchv1.JobReasonBackoffLimitExceeded || condition(j, batchv1.JobFailureTarget) == nil {
		t.Fatalf("conditions %+v", j.Status.Conditions)
	}
	if j.Status.Failed != 3 || j.Status.Succeeded != 0 || j.Status.Active != 0 {
		t.Fatalf("status %+v", j.Status)
	}
	if n := len(jobPods(t, cp, j)); n != 3 {
		t.Fatalf("%d pods: backoffLimit 2 allows 3 attempts", n)
	}
}

func TestIndexedJobGivesEachPodItsIndex(t *testing.T) {
	cp, ctx := setup(t)
	created, err := cp.Client.Create(ctx, newJob("idx", func(j *batchv1.Job) {
		j.Spec.Completions, j.Spec.Parallelism = ptr.To(int32(3)), ptr.To(int32(3))
		j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	}))
	if err != nil {
		t.Fatal(err)
	}
	j := created.(*batchv1.Job)
	var pods []*corev1.Pod
	ct.Wait(t, func() error {
		if pods = running(jobPods(t, cp, j)); len(pods) != 3 {
			return ct.Errorf("%d running pods", len(pods))
		}
		return nil
	})
	seen := map[string]bool{}
	for _, p := range pods {
		ix := p.Annotations[batchv1.JobCompletionIndexAnnotation]
		if p.Labels[batchv1.JobCompletionIndexAnnotation] != ix || p.Spec.Hostname != "idx-"+ix || !strings.HasPrefix(p.Name, "idx-"+ix+"-") {
			t.Fatalf("pod %s: index %q, label %q, hostname %q", p.Name, ix, p.Labels[batchv1.JobCompletionIndexAnnotation], p.Spec.Hostname)
		}
		env := p.Spec.Containers[0].Env
		if len(env) != 1 || env[0].Name != "JOB_COMPLETION_INDEX" || env[0].ValueFrom.FieldRef.FieldPath != "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
			t.Fatalf("pod %s env %+v", p.Name, env)
		}
		seen[ix] = true
	}
	if !seen["0"] || !seen["1"] || !seen["2"] {
		t.Fatalf("indexes %v", seen)
	}
	// Index 1 fails once: its replacement gets index 1 again.
	byIndex := func(ix string) *corev1.Pod {
		for _, p := range pods {
			if p.Annotations[batchv1.JobCompletionIndexAnnotation] == ix {
				return p
			}
		}
		return nil
	}
	end(t, cp, byIndex("0"), corev1.PodSucceeded, 0)
	end(t, cp, byIndex("1"), corev1.PodFailed, 3)
	end(t, cp, byIndex("2"), corev1.PodSucceeded, 0)
	waitJob(t, cp, "idx", func(j *batchv1.Job) error {
		if j.Status.CompletedIndexes != "0,2" {
			return ct.Errorf("completedIndexes %q", j.Status.CompletedIndexes)
		}
		return nil
	})
	var again *corev1.Pod
	ct.Wait(t, func() error {
		for _, p := range running(jobPods(t, cp, j)) {
			again = p
			return nil
		}
		return ct.Errorf("index 1 not restarted")
	})
	if ix := again.Annotations[batchv1.JobCompletionIndexAnnotation]; ix != "1" {
		t.Fatalf("replacement has index %q", ix)
	}
	end(t, cp, again, corev1.PodSucceeded, 0)
	j = waitJob(t, cp, "idx", finishedWith(batchv1.JobComplete))
	if j.Status.CompletedIndexes != "0-2" || j.Status.Succeeded != 3 || j.Status.Failed != 1 {
		t.Fatalf("status %+v", j.Status)
	}
}
