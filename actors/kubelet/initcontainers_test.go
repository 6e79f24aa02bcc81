package kubelet_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/kubelet/kubelettest"
	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
)

// initPod is a pod whose init containers share the emptyDir /work with its app container.
func initPod(name string, inits ...corev1.Container) *corev1.Pod {
	return pod(name, func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		work := []corev1.VolumeMount{{Name: "work", MountPath: "/work"}}
		p.Spec.Containers[0].VolumeMounts = work
		for _, c := range inits {
			c.Image, c.VolumeMounts = kubelettest.Image, work
			p.Spec.InitContainers = append(p.Spec.InitContainers, c)
		}
	})
}

// appender is an init container that appends its name to /work/order and exits with code.
func appender(name string, code int) corev1.Container {
	return corev1.Container{Name: name, Args: []string{"-append", "/work/order=" + name, "-exit-code", fmt.Sprint(code)}}
}

func initStatus(p *corev1.Pod, name string) corev1.ContainerStatus {
	for _, cs := range p.Status.InitContainerStatuses {
		if cs.Name == name {
			return cs
		}
	}
	return corev1.ContainerStatus{}
}

func condition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// sidecarRunsAgain waits for the sidecar proxy's restarts-th restart and a ready pod.
func sidecarRunsAgain(restarts int32) func(*corev1.Pod) error {
	return func(p *corev1.Pod) error {
		if cs := initStatus(p, "proxy"); cs.RestartCount != restarts || cs.State.Running == nil {
			return fmt.Errorf("sidecar %+v", cs)
		}
		return runningReady(p)
	}
}

// Init containers run one at a time, in order, before the app; a sidecar starts in its place
// (the init container after it reaches it), runs alongside the app, counts toward readiness
// and is restarted when it exits; a new agent does not run finished init containers again.
func TestInitContainersAndSidecarRunInOrder(t *testing.T) {
	h := start(t)
	sidecar := corev1.Container{Name: "proxy", Args: []string{"-port", "8081"},
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		StartupProbe: &corev1.Probe{PeriodSeconds: 1,
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8081)}}}}
	// check fails (and would be retried) unless the sidecar already serves.
	check := corev1.Container{Name: "check", Args: []string{"-probe", "http://127.0.0.1:8081/healthz"}}
	h.create(initPod("inits", appender("first", 0), sidecar, check, appender("second", 0)))
	p := h.waitPod("inits", 60*time.Second, runningReady)

	if got, err := h.cat(p, "/work/order"); err != nil || got != "first\nsecond\n" {
		t.Fatalf("/work/order %q (%v): want first, then second", got, err)
	}
	if len(p.Status.InitContainerStatuses) != 4 {
		t.Fatalf("initContainerStatuses %+v", p.Status.InitContainerStatuses)
	}
	for _, name := range []string{"first", "check", "second"} {
		cs := initStatus(p, name)
		if term := cs.State.Terminated; term == nil || term.ExitCode != 0 || term.Reason != kruntime.ReasonCompleted || !cs.Ready || cs.RestartCount != 0 {
			t.Errorf("init container %s: %+v, want Completed once and ready", name, cs)
		}
	}
	proxy := initStatus(p, "proxy")
	if proxy.State.Running == nil || !proxy.Ready || proxy.Started == nil || !*proxy.Started {
		t.Errorf("sidecar %+v, want running, started and ready", proxy)
	}
	if condition(p, corev1.PodInitialized) != corev1.ConditionTrue {
		t.Errorf("conditions %+v, want Initialized", p.Status.Conditions)
	}
	for _, port := range []string{"8080", "8081"} {
		if _, err := httpGet("http://" + p.Status.PodIP + ":" + port + "/"); err != nil {
			t.Errorf("app and sidecar serve side by side: %v", err)
		}
	}

	// The sidecar exits: it is restarted, the app keeps running.
	hit(t, "http://"+p.Status.PodIP+":8081/exit?code=1")
	p = h.waitPod("inits", 30*time.Second, sidecarRunsAgain(1))
	if app := p.Status.ContainerStatuses[0]; app.RestartCount != 0 || app.State.Running == nil {
		t.Errorf("app %+v, want untouched by the sidecar's restart", app)
	}

	// A brand-new agent: what finished stays finished.
	before := p.Status.InitContainerStatuses
	h.newAgent()
	// The sidecar exits again: its restart shows the new agent has synced the pod.
	hit(t, "http://"+p.Status.PodIP+":8081/exit?code=1")
	p = h.waitPod("inits", 30*time.Second, sidecarRunsAgain(2))
	for i, cs := range p.Status.InitContainerStatuses {
		if cs.Name != "proxy" && (cs.ContainerID != before[i].ContainerID || cs.RestartCount != before[i].RestartCount) {
			t.Errorf("after a new agent %s is %s (restarts %d), was %s (%d)", cs.Name, cs.ContainerID, cs.RestartCount, before[i].ContainerID, before[i].RestartCount)
		}
	}
	if got, err := h.cat(p, "/work/order"); err != nil || got != "first\nsecond\n" {
		t.Errorf("/work/order after a new agent %q (%v): the init containers ran again", got, err)
	}
}

// A failing init container is retried under the crash-loop back-off while the pod waits
// (Pending, Init:CrashLoopBackOff in kubectl); with restartPolicy Never the pod fails and its
// app never starts.
func TestFailingInitContainer(t *testing.T) {
	h := start(t)
	reasons := h.watchReasons("init-crash")
	h.create(initPod("init-crash", appender("setup", 3)))
	never := initPod("init-never", appender("setup", 3), appender("later", 0))
	never.Spec.RestartPolicy = corev1.RestartPolicyNever
	h.create(never)
	p := h.waitPod("init-crash", 60*time.Second, func(p *corev1.Pod) error {
		cs := initStatus(p, "setup")
		if cs.RestartCount < 2 || !reasons.seen("CrashLoopBackOff") {
			return fmt.Errorf("setup %+v, reasons %v", cs, reasons.list())
		}
		return nil
	})
	cs := initStatus(p, "setup")
	if last := cs.LastTerminationState.Terminated; last == nil || last.ExitCode != 3 || cs.Ready {
		t.Errorf("setup %+v, want its exit 3 as lastState, not ready", cs)
	}
	app := p.Status.ContainerStatuses[0]
	if p.Status.Phase != corev1.PodPending || app.State.Waiting == nil || app.State.Waiting.Reason != "PodInitializing" ||
		condition(p, corev1.PodInitialized) != corev1.ConditionFalse {
		t.Errorf("pod %s, app %+v, conditions %+v: want Pending, the app waiting PodInitializing, not Initialized", p.Status.Phase, app, p.Status.Conditions)
	}
	h.expectEvent("BackOff")

	never = h.waitPod("init-never", 30*time.Second, func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("phase %s, init %+v", p.Status.Phase, p.Status.InitContainerStatuses)
		}
		return nil
	})
	if cs := initStatus(never, "setup"); cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 3 || cs.RestartCount != 0 {
		t.Errorf("setup %+v, want one run that exited 3", cs)
	}
	if cs := initStatus(never, "later"); cs.State.Waiting == nil || cs.State.Waiting.Reason != "PodInitializing" {
		t.Errorf("later %+v, want never started", cs)
	}
	if app := never.Status.ContainerStatuses[0]; app.ContainerID != "" || controllerkit.IsPodReady(never) {
		t.Errorf("app %+v, want never started", app)
	}
	h.waitFinished(never)
}
