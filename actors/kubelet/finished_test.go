package kubelet_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
)

// A finished pod keeps its exited containers' logs (kubectl logs job/x) but nothing running and
// no network; the logs go when the pod is deleted, also when that happened while no agent ran.
func TestFinishedPodKeepsLogsUntilDeleted(t *testing.T) {
	h := start(t)
	before := bridgePorts(h.n.Options.Bridge)
	for _, name := range []string{"said", "said-offline"} {
		h.create(pod(name, func(p *corev1.Pod) {
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
			p.Spec.Containers[0].Args = []string{"-exit-after", "200ms"}
		}))
	}
	var logs []string
	var pods []*corev1.Pod
	for _, name := range []string{"said", "said-offline"} {
		p := h.waitPod(name, 30*time.Second, func(p *corev1.Pod) error {
			if p.Status.Phase != corev1.PodSucceeded {
				return fmt.Errorf("phase %s %+v", p.Status.Phase, p.Status.ContainerStatuses)
			}
			return nil
		})
		sb := h.waitFinished(p)
		if len(sb.Containers) != 1 {
			t.Fatalf("%s: containers %+v, want the one exited container kept", name, sb.Containers)
		}
		b, err := os.ReadFile(sb.Containers[0].LogPath)
		if err != nil || !strings.Contains(string(b), "exiting with code 0") {
			t.Fatalf("%s: log %q: %v", name, b, err)
		}
		logs = append(logs, sb.Containers[0].LogPath)
		pods = append(pods, p)
	}
	if added := diff(bridgePorts(h.n.Options.Bridge), before); len(added) > 0 {
		t.Errorf("finished pods still attached to the bridge: %v", added)
	}

	h.deletePod("said")
	h.waitGone("said")
	h.waitCleaned(pods[0], logs[0])

	h.stop()
	if err := h.cp.Client.Delete(ctx(t), controllerkit.MustKind("", "pods"), "default", "said-offline",
		&metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	h.newAgent()
	h.waitCleaned(pods[1], logs[1])
}

// waitFinished waits for the pod's sandbox to be finished: marked so, no IP, no network
// namespace, no container process, no files but the logs.
func (h *harness) waitFinished(p *corev1.Pod) *kruntime.SandboxStatus {
	h.t.Helper()
	var sb *kruntime.SandboxStatus
	wait(h.t, 20*time.Second, func() error {
		sb = h.sandboxOf(p)
		if sb == nil || !sb.Finished || sb.Ready || sb.IP != "" {
			return fmt.Errorf("%s: sandbox %+v, want it kept and finished", p.Name, sb)
		}
		if _, err := os.Stat(sb.NetNSPath); !os.IsNotExist(err) {
			return fmt.Errorf("%s: network namespace %s: %v", p.Name, sb.NetNSPath, err)
		}
		// Of the pod's files only the logs stay (volumes go, as Kubernetes' kubelet tears down
		// a terminated pod's volumes).
		entries, err := os.ReadDir(h.n.Runtime.PodDir(string(p.UID)))
		if err != nil || len(entries) != 1 || entries[0].Name() != "logs" {
			return fmt.Errorf("%s: pod directory %v (%v), want logs alone", p.Name, entries, err)
		}
		for _, c := range sb.Containers {
			if c.State == kruntime.StateRunning || c.Pid != 0 {
				return fmt.Errorf("%s: container %+v still has a process", p.Name, c)
			}
		}
		return nil
	})
	return sb
}

// waitCleaned waits for a deleted pod to leave nothing on the node: no record, no files.
func (h *harness) waitCleaned(p *corev1.Pod, log string) {
	h.t.Helper()
	wait(h.t, 20*time.Second, func() error {
		if sb := h.sandboxOf(p); sb != nil {
			return fmt.Errorf("%s: sandbox %+v remains", p.Name, sb)
		}
		for _, f := range []string{log, h.n.Runtime.PodDir(string(p.UID))} {
			if _, err := os.Stat(f); !os.IsNotExist(err) {
				return fmt.Errorf("%s: %s remains (%v)", p.Name, f, err)
			}
		}
		return nil
	})
}
