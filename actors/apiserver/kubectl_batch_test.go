package apiserver_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// TestKubectlCronJobAndJob runs kubectl's own batch commands against the whole control plane
// (its controller-manager runs the Job and CronJob controllers); the test ends the pod.
func TestKubectlCronJobAndJob(t *testing.T) {
	cp := testutil.StartControlPlane(t)
	kubectl := kubectlEnv(t, cp.URL())
	out, err := kubectl("create", "cronjob", "tick", "--image=img:1", "--schedule=*/5 * * * *", "--", "/bin/true")
	if err != nil || !strings.Contains(out, "cronjob.batch/tick created") {
		t.Fatalf("create cronjob: %v\n%s", err, out)
	}
	out, err = kubectl("get", "cj")
	if err != nil || !strings.Contains(out, "SCHEDULE") || !strings.Contains(out, "TIMEZONE") || !strings.Contains(out, "LAST SCHEDULE") ||
		!strings.Contains(out, "*/5 * * * *") || !strings.Contains(out, "<none>") || !strings.Contains(out, "False") {
		t.Fatalf("get cj: %v\n%s", err, out)
	}
	out, err = kubectl("create", "cronjob", "bad", "--image=img:1", "--schedule=every minute")
	if err == nil || !strings.Contains(out, "spec.schedule") {
		t.Fatalf("bad schedule accepted: %v\n%s", err, out)
	}

	out, err = kubectl("create", "job", "manual", "--from=cronjob/tick")
	if err != nil || !strings.Contains(out, "job.batch/manual created") {
		t.Fatalf("create job --from: %v\n%s", err, out)
	}
	out, err = kubectl("get", "job", "manual", "-o", "jsonpath={.metadata.annotations.cronjob\\.kubernetes\\.io/instantiate} {.spec.backoffLimit} {.spec.completionMode}")
	if err != nil || out != "manual 6 NonIndexed" {
		t.Fatalf("job from cronjob: %v %q", err, out)
	}
	ctx := context.Background()
	var pod *corev1.Pod
	testutil.Eventually(t, 30*time.Second, 20*time.Millisecond, func() error {
		objs, _, err := cp.Client.List(ctx, mustKind(t, "", "pods"), "default", url.Values{"labelSelector": {batchv1.JobNameLabel + "=manual"}})
		if err != nil || len(objs) != 1 {
			return fmt.Errorf("pods %d, %v", len(objs), err)
		}
		pod = objs[0].(*corev1.Pod)
		return nil
	})
	if len(pod.Finalizers) != 1 || pod.Finalizers[0] != batchv1.JobTrackingFinalizer {
		t.Fatalf("pod finalizers %v", pod.Finalizers)
	}
	out, _ = kubectl("get", "job", "manual")
	if !strings.Contains(out, "STATUS") || !strings.Contains(out, "COMPLETIONS") || !strings.Contains(out, "Running") || !strings.Contains(out, "0/1") {
		t.Fatalf("get job:\n%s", out)
	}
	testutil.Eventually(t, 30*time.Second, 20*time.Millisecond, func() error {
		o, err := cp.Client.Get(ctx, mustKind(t, "", "pods"), "default", pod.Name)
		if err != nil {
			return err
		}
		p := o.(*corev1.Pod)
		p.Status.Phase = corev1.PodSucceeded
		_, err = cp.Client.UpdateStatus(ctx, p)
		return err
	})
	out, err = kubectl("wait", "--for=condition=complete", "job/manual", "--timeout=30s")
	if err != nil {
		t.Fatalf("wait: %v\n%s", err, out)
	}
	out, _ = kubectl("get", "job", "manual")
	if !strings.Contains(out, "Complete") || !strings.Contains(out, "1/1") {
		t.Fatalf("get job:\n%s", out)
	}
}

func mustKind(t *testing.T, group, resource string) *schemas.Kind {
	k, ok := schemas.ByResource(group, "v1", resource)
	if !ok {
		t.Fatalf("no kind %s/%s", group, resource)
	}
	return k
}
