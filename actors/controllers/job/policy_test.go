package job_test

import (
	"sync/atomic"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controllers/garbagecollector"
	"github.com/skiff-sh/skiff/actors/controllers/job"
	"github.com/skiff-sh/skiff/actors/controllers/ttlafterfinished"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/informer"
)

func TestPodFailurePolicyIgnoreAndFailJob(t *testing.T) {
	cp, ctx := setup(t)
	created, err := cp.Client.Create(ctx, newJob("pfp", func(j *batchv1.Job) {
		j.Spec.BackoffLimit = ptr.To(int32(0))
		j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
			{Action: batchv1.PodFailurePolicyActionIgnore, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
				Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{143}}},
			{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
				Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}}},
		}}
	}))
	if err != nil {
		t.Fatal(err)
	}
	j := created.(*batchv1.Job)
	first := waitRunning(t, cp, j, nil)
	// Exit 143 is ignored: with backoffLimit 0 the Job still gets a second pod.
	end(t, cp, first, corev1.PodFailed, 143)
	second := waitRunning(t, cp, j, first)
	end(t, cp, second, corev1.PodFailed, 42)
	j = waitJob(t, cp, "pfp", finishedWith(batchv1.JobFailed))
	if c := condition(j, batchv1.JobFailed); c.Reason != batchv1.JobReasonPodFailurePolicy || j.Status.Failed != 1 {
		t.Fatalf("status %+v", j.Status)
	}
}

// waitRunning waits for a running pod of j other than not.
func waitRunning(t *testing.T, cp ctPlane, j *batchv1.Job, not *corev1.Pod) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	ct.Wait(t, func() error {
		for _, r := range running(jobPods(t, cp, j)) {
			if not == nil || r.UID != not.UID {
				p = r
				return nil
			}
		}
		return ct.Errorf("no running pod")
	})
	return p
}

func TestSuspendDeletesPodsAndResumes(t *testing.T) {
	cp, ctx := setup(t)
	created, err := cp.Client.Create(ctx, newJob("pause", func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To(int32(2)); j.Spec.Completions = ptr.To(int32(2)) }))
	if err != nil {
		t.Fatal(err)
	}
	j := created.(*batchv1.Job)
	waitRunning(t, cp, j, nil)
	setSuspend(t, cp, "pause", true)
	j = waitJob(t, cp, "pause", func(j *batchv1.Job) error {
		if condition(j, batchv1.JobSuspended) == nil || j.Status.Active != 0 {
			return ct.Errorf("status %+v", j.Status)
		}
		return nil
	})
	ct.Wait(t, func() error {
		if ps := jobPods(t, cp, j); len(ps) != 0 {
			return ct.Errorf("%d pods left while suspended", len(ps))
		}
		return nil
	})
	if j.Status.Failed != 0 {
		t.Fatalf("suspension counted as failures: %+v", j.Status)
	}
	setSuspend(t, cp, "pause", false)
	waitJob(t, cp, "pause", func(j *batchv1.Job) error {
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobSuspended && c.Status == corev1.ConditionFalse && c.Reason == "JobResumed" && j.Status.Active == 2 {
				return nil
			}
		}
		return ct.Errorf("not resumed: %+v", j.Status)
	})
}

func setSuspend(t *testing.T, cp ctPlane, name string, v bool) {
	t.Helper()
	ct.Wait(t, func() error {
		j := ct.Get[*batchv1.Job](t, cp, "batch", "jobs", "default", name)
		j.Spec.Suspend = ptr.To(v)
		_, err := cp.Client.Update(ct.Ctx(t), j)
		return err
	})
}

func TestActiveDeadlineAndTTLAfterFinished(t *testing.T) {
	cp, ctx := setup(t)
	ct.Spawn(t, cp, "ttl", ttlafterfinished.New(ttlafterfinished.Config{Informers: cp.Informers, Client: cp.Client}))
	ct.Spawn(t, cp, "gc", garbagecollector.New(garbagecollector.Config{Informers: cp.Informers, Client: cp.Client}))
	ran := ranPod(t, cp, "slow")
	created, err := cp.Client.Create(ctx, newJob("slow", func(j *batchv1.Job) {
		// Long enough for the pod to be bound and run on two busy cores first.
		j.Spec.ActiveDeadlineSeconds = ptr.To(int64(3))
		j.Spec.TTLSecondsAfterFinished = ptr.To(int32(0))
	}))
	if err != nil {
		t.Fatal(err)
	}
	j := created.(*batchv1.Job)
	ct.Wait(t, func() error {
		if !ran() {
			return ct.Errorf("no pod of the job ran")
		}
		return nil
	})
	// The pod never ends by itself: the deadline fails the Job, and the TTL deletes it with
	// its pods at once.
	var failedReason string
	ct.Wait(t, func() error {
		cur, err := ct.TryGet[*batchv1.Job](cp, "batch", "jobs", "default", "slow")
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if c := condition(cur, batchv1.JobFailed); c != nil {
			failedReason = c.Reason
		}
		return ct.Errorf("job still there: %+v", cur.Status)
	})
	if failedReason != "" && failedReason != batchv1.JobReasonDeadlineExceeded {
		t.Fatalf("failed with %s", failedReason)
	}
	ct.Wait(t, func() error {
		if ps := ct.ListPods(t, cp, "default", batchv1.ControllerUidLabel+"="+string(j.UID)); len(ps) != 0 {
			return ct.Errorf("%d pods outlive the job", len(ps))
		}
		return nil
	})
	// The Event is the lasting record of why it failed.
	ct.WaitEvent(t, cp, "slow", batchv1.JobReasonDeadlineExceeded, job.Name)
}

// ranPod reports whether a pod of the Job named name was ever seen Running, from the pod
// informer's events: a poll of the pods misses one that a short deadline ends between two
// polls (a full test run on two busy cores once saw no running pod in 30 s).
func ranPod(t *testing.T, cp ctPlane, name string) func() bool {
	var ran atomic.Bool
	note := func(o runtime.Object) {
		p := o.(*corev1.Pod)
		if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "Job" && ref.Name == name && p.Status.Phase == corev1.PodRunning {
			ran.Store(true)
		}
	}
	t.Cleanup(cp.Informers.For("", "pods").AddHandler(informer.Funcs{Add: note, Update: func(_, o runtime.Object) { note(o) }}))
	return ran.Load
}

type ctPlane = *controlplane.ControlPlane
