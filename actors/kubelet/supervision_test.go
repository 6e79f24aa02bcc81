package kubelet_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/kubelet"
)

// A panic in one pod's sync restarts that pod's actor, and a panic in one probe restarts that
// probe's actor: the process, the kubelet and the other pods go on untouched, no container is
// restarted, the probe results survive, and the pod still converges on what its probe finds.
func TestPanicsInAPodSyncAndAProbeRestartOnlyThatActor(t *testing.T) {
	h := start(t)
	h.create(pod("steady"))
	h.create(pod("victim", func(p *corev1.Pod) {
		p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1,
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8080)}}}
	}))
	steady := h.waitPod("steady", 30*time.Second, runningReady)
	victim := h.waitPod("victim", 30*time.Second, runningReady)
	steadySB, victimSB := h.sandboxOf(steady), h.sandboxOf(victim)
	if steadySB == nil || victimSB == nil {
		t.Fatalf("sandboxes %+v %+v", steadySB, victimSB)
	}
	health := h.cp.Actors.Health()
	podActor := h.pid.Id + "/" + kubelet.PodActorName("default", "victim")
	steadyActor := h.pid.Id + "/" + kubelet.PodActorName("default", "steady")
	ctrID := strings.TrimPrefix(victim.Status.ContainerStatuses[0].ContainerID, "containerd://")
	probeActor := podActor + "/" + kubelet.ProbeActorName("Readiness", ctrID)
	restarts := func(path string, want int) func() error {
		return func() error {
			if n := health.Restarts(path); n != want {
				return fmt.Errorf("%s restarted %d times, want %d", path, n, want)
			}
			return nil
		}
	}
	untouched := func(stage string) {
		t.Helper()
		for path, want := range map[string]int{h.pid.Id: 0, steadyActor: 0} {
			if err := restarts(path, want)(); err != nil {
				t.Fatalf("%s: %v", stage, err)
			}
		}
		for p, was := range map[*corev1.Pod]uint32{steady: steadySB.Containers[0].Pid, victim: victimSB.Containers[0].Pid} {
			now := h.sandboxOf(p)
			if now == nil || len(now.Containers) != 1 || now.Containers[0].Pid != was {
				t.Fatalf("%s: pod %s's container changed: %+v, pid was %d", stage, p.Name, now, was)
			}
		}
		if err := health.Check(); err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
	}

	// 1. The victim's next sync panics (a label change wakes it).
	actorkit.InjectPanic(kubelet.FaultPodSync("default", "victim"), 1)
	h.label("victim", "poke", "1")
	wait(t, 30*time.Second, restarts(podActor, 1))
	h.waitPod("victim", 30*time.Second, func(p *corev1.Pod) error {
		if p.Labels["poke"] != "1" {
			return fmt.Errorf("labels %v", p.Labels)
		}
		return runningReady(p)
	})
	untouched("after the pod actor's panic")

	// 2. The victim's readiness probe panics on its next result; the restarted probe actor
	// keeps the result (Ready) and goes on probing.
	actorkit.InjectPanic(kubelet.FaultProbe("default", "victim", "web", "Readiness"), 1)
	wait(t, 30*time.Second, restarts(probeActor, 1))
	if err := restarts(podActor, 1)(); err != nil {
		t.Fatal(err)
	}
	if p, err := h.get("victim"); err != nil || runningReady(p) != nil {
		t.Fatalf("victim after the probe's panic: %v %v", err, runningReady(p))
	}
	untouched("after the probe actor's panic")

	// 3. The pod converges on what the restarted probe finds: not ready, then ready again.
	hit(t, "http://"+victim.Status.PodIP+":8080/fail?what=ready")
	h.waitPod("victim", 20*time.Second, func(p *corev1.Pod) error {
		if cs := p.Status.ContainerStatuses[0]; cs.Ready || cs.RestartCount != 0 {
			return fmt.Errorf("victim still ready or restarted: %+v", cs)
		}
		return nil
	})
	hit(t, "http://"+victim.Status.PodIP+":8080/recover?what=ready")
	h.waitPod("victim", 20*time.Second, runningReady)
	untouched("after convergence")
}

// label sets one label on a pod through the API.
func (h *harness) label(name, key, value string) {
	h.t.Helper()
	wait(h.t, 10*time.Second, func() error {
		p, err := h.get(name)
		if err != nil {
			return err
		}
		p = p.DeepCopy()
		p.Labels[key] = value
		_, err = h.cp.Client.Update(context.Background(), p)
		return err
	})
}

// A kubelet that watches its pods through the API (as a joined agent does) runs the pods bound
// to it, and goes on doing so after the apiserver restarts.
func TestKubeletWatchesItsPodsThroughTheAPI(t *testing.T) {
	h := start(t, func(c *kubelet.Config) { c.PodsViaAPI = true })
	h.create(pod("via-api"))
	h.waitPod("via-api", 30*time.Second, runningReady)

	starts := h.cp.API.Starts()
	h.cp.Actors.Send(h.cp.Actor(controlplane.APIServer), &actorkit.Crash{})
	wait(t, 30*time.Second, func() error {
		if h.cp.API.Starts() <= starts {
			return fmt.Errorf("apiserver not restarted")
		}
		return nil
	})
	wait(t, 30*time.Second, func() error { _, err := h.get("via-api"); return err })
	h.create(pod("after-restart"))
	h.waitPod("after-restart", 30*time.Second, runningReady)
	h.deletePod("via-api")
	h.waitGone("via-api")
}
