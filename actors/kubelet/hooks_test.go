package kubelet_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

// postStart runs right after the start, preStop before the stop signal on deletion (both
// leave a line in a host directory, which outlives the pod); a failing postStart kills the
// container with a FailedPostStartHook event, and the restart policy restarts it.
func TestLifecycleHooks(t *testing.T) {
	h := start(t)
	dir := t.TempDir()
	appendLine := func(line string) *corev1.LifecycleHandler {
		return &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/httpecho", "-append", "/hooks/log=" + line}}}
	}
	h.create(pod("hooked", func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "hooks", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}}}}
		c := &p.Spec.Containers[0]
		c.VolumeMounts = []corev1.VolumeMount{{Name: "hooks", MountPath: "/hooks"}}
		c.Lifecycle = &corev1.Lifecycle{PostStart: appendLine("postStart"), PreStop: appendLine("preStop")}
	}))
	h.create(pod("bad-hook", func(p *corev1.Pod) {
		p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(1)}}}
	}))
	h.waitPod("hooked", 30*time.Second, runningReady)
	log := filepath.Join(dir, "log")
	if b, err := os.ReadFile(log); err != nil || string(b) != "postStart\n" {
		t.Fatalf("hook log %q (%v), want postStart once", b, err)
	}
	h.deletePod("hooked")
	h.waitGone("hooked")
	if b, err := os.ReadFile(log); err != nil || string(b) != "postStart\npreStop\n" {
		t.Errorf("hook log %q (%v), want preStop after postStart", b, err)
	}

	h.expectEvent("FailedPostStartHook")
	h.waitPod("bad-hook", 30*time.Second, func(p *corev1.Pod) error {
		if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].RestartCount < 1 || controllerkit.IsPodReady(p) {
			return fmt.Errorf("bad-hook %+v, want restarted after its hook failed, never ready", cs)
		}
		return nil
	})
}

// What a container writes to its terminationMessagePath becomes its terminated state's
// message.
func TestTerminationMessage(t *testing.T) {
	h := start(t)
	h.create(pod("last-words", func(p *corev1.Pod) {
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		p.Spec.Containers[0].Args = []string{"-append", corev1.TerminationMessagePathDefault + "=bye", "-exit-code", "3"}
	}))
	p := h.waitPod("last-words", 30*time.Second, func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("phase %s %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		return nil
	})
	if term := p.Status.ContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 3 || term.Message != "bye\n" {
		t.Errorf("terminated %+v, want exit 3 with message %q", term, "bye\n")
	}
}
