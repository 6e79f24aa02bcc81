package job

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func trackedPod(n int, phase corev1.PodPhase, finalizer bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("work-%d", n), UID: types.UID(fmt.Sprintf("uid-%d", n))},
		Status: corev1.PodStatus{Phase: phase}}
	if finalizer {
		p.Finalizers = []string{batchv1.JobTrackingFinalizer}
	}
	return p
}

// The pod cache can lag behind the Job cache: a sync may see a Job that already counts a pod
// whose finalizer removal the pod cache does not show yet. Counting that pod again made a Job
// of 5 completions finish with 4 pods done and delete its running fifth (a flake of the Jobs
// end-to-end test).
func TestAPodWhoseFinalizerRemovalIsNotSeenYetIsNotCountedAgain(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "work"},
		Spec: batchv1.JobSpec{Completions: ptr.To[int32](5), Parallelism: ptr.To[int32](2),
			PodReplacementPolicy: ptr.To(batchv1.TerminatingOrFailed)},
		Status: batchv1.JobStatus{Succeeded: 4, UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{}}}
	pods := []*corev1.Pod{
		trackedPod(1, corev1.PodSucceeded, false), trackedPod(2, corev1.PodSucceeded, false),
		trackedPod(3, corev1.PodSucceeded, false),
		trackedPod(4, corev1.PodSucceeded, true), // counted; its finalizer's removal not seen yet
		trackedPod(5, corev1.PodRunning, true),
	}
	c := &controller{removals: newFinalizerRemovals()}
	c.removals.expect(pods[3].UID)

	removing := c.removals.pending()
	jc := newJobCtx(job, "default/work", pods, time.Now())
	jc.removing = removing
	c.account(jc)
	if got := jc.succeeded(); got != 4 || jc.needsFlush || len(jc.release) != 0 {
		t.Fatalf("succeeded %d (want 4), flush %v, release %d: the counted pod was counted again", got, jc.needsFlush, len(jc.release))
	}
	if err := c.track(context.Background(), jc); err != nil || jc.succeeded() != 4 { // nothing to write: no client needed
		t.Fatalf("after tracking: succeeded %d, %v", jc.succeeded(), err)
	}
	if len(jc.active) != 1 || jc.terminalReached() {
		t.Fatalf("active %d, terminal %v: the fifth pod still runs", len(jc.active), jc.terminalReached())
	}

	// The cache showing the removal (or the pod's deletion) ends the wait; a pod that still
	// carries the finalizer does not.
	c.removals.podSeen(pods[3])
	if !c.removals.pending().Has(pods[3].UID) {
		t.Fatal("a pod still showing the finalizer ended the wait for its removal")
	}
	c.removals.podSeen(trackedPod(4, corev1.PodSucceeded, false))
	c.removals.expect(pods[4].UID)
	c.removals.observed(pods[4].UID)
	if n := c.removals.pending().Len(); n != 0 {
		t.Fatalf("%d removals still awaited after each was seen", n)
	}
}
