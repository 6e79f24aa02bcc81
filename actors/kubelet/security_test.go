package kubelet_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// The pod's securityContext is the default for its containers, which override it field by
// field; runAsNonRoot with an image that runs as root waits with the kubelet's reason and message.
func TestSecurityContextPrecedenceAndNonRoot(t *testing.T) {
	h := start(t)
	h.create(pod("secure", func(p *corev1.Pod) {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](2000), RunAsNonRoot: ptr.To(true)}
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsGroup: ptr.To[int64](3000),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	}))
	p := h.waitPod("secure", 30*time.Second, runningReady)
	st, err := h.cat(p, "/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Uid:\t1000\t1000\t1000\t1000\n", "Gid:\t3000\t3000\t3000\t3000\n", "CapBnd:\t0000000000000000\n"} {
		if !strings.Contains(st, want) {
			t.Errorf("status of a container running as the pod's user with its own group and no capabilities: want %q in\n%s", want, st)
		}
	}

	h.create(pod("rootimg", func(p *corev1.Pod) {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}
	}))
	got, _ := h.get("rootimg")
	want := fmt.Sprintf("container has runAsNonRoot and image will run as root (pod: %q, container: web)", "rootimg_default("+string(got.UID)+")")
	h.waitPod("rootimg", 30*time.Second, func(p *corev1.Pod) error {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason == "CreateContainerConfigError" && w.Message == want {
				return nil
			}
		}
		return fmt.Errorf("statuses %+v, want CreateContainerConfigError %q", p.Status.ContainerStatuses, want)
	})
}
