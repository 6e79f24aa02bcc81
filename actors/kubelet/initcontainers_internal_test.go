package kubelet

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
)

func orderPod() *corev1.Pod {
	always := ptr.To(corev1.ContainerRestartPolicyAlways)
	return &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways,
		InitContainers: []corev1.Container{{Name: "a"}, {Name: "log", RestartPolicy: always}, {Name: "b"}, {Name: "mesh", RestartPolicy: always}},
		Containers:     []corev1.Container{{Name: "app"}, {Name: "worker"}}}}
}

func names(cs []*corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// The init order as the sync walks it: one ordinary init container at a time, each after the
// sidecars before it; the app containers only once all are through; a finished pod's records
// (app attempts) settle it for good.
func TestInitBlockerAndWhatTheSyncTouches(t *testing.T) {
	k := &kubelet{}
	k.probes = newProbeManager(k)
	pod := orderPod()
	exited := func(name string, code int) kruntime.ContainerStatus {
		return kruntime.ContainerStatus{ID: name + "-0", Name: name, State: kruntime.StateExited, ExitCode: code}
	}
	running := func(name string) kruntime.ContainerStatus {
		return kruntime.ContainerStatus{ID: name + "-0", Name: name, State: kruntime.StateRunning}
	}
	for _, tc := range []struct {
		name     string
		atts     []kruntime.ContainerStatus
		blocker  int
		touches  []string
		policies []corev1.RestartPolicy
	}{
		{"nothing ran", nil, 0, []string{"a"}, []corev1.RestartPolicy{corev1.RestartPolicyOnFailure}},
		{"a failed", []kruntime.ContainerStatus{exited("a", 1)}, 0, []string{"a"}, nil},
		{"a done", []kruntime.ContainerStatus{exited("a", 0)}, 1, []string{"log"}, []corev1.RestartPolicy{corev1.RestartPolicyAlways}},
		{"sidecar runs", []kruntime.ContainerStatus{exited("a", 0), running("log")}, 2, []string{"log", "b"}, nil},
		{"sidecar exited", []kruntime.ContainerStatus{exited("a", 0), exited("log", 0), exited("b", 0)}, 1, []string{"log"}, nil},
		{"all through", []kruntime.ContainerStatus{exited("a", 0), running("log"), exited("b", 0), running("mesh")}, 4,
			[]string{"log", "mesh", "app", "worker"}, []corev1.RestartPolicy{"Always", "Always", "Always", "Always"}},
		{"app ran once", []kruntime.ContainerStatus{exited("app", 0)}, 4, []string{"log", "mesh", "app", "worker"}, nil},
	} {
		atts := byName(&kruntime.SandboxStatus{Containers: tc.atts})
		b := k.initBlocker(pod, atts)
		cs, policies := podContainers(pod, b)
		if b != tc.blocker || !slices.Equal(names(cs), tc.touches) || tc.policies != nil && !slices.Equal(policies, tc.policies) {
			t.Errorf("%s: blocker %d, sync touches %v %v; want %d, %v %v", tc.name, b, names(cs), policies, tc.blocker, tc.touches, tc.policies)
		}
	}
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	if _, policies := podContainers(pod, 0); policies[0] != corev1.RestartPolicyNever {
		t.Errorf("an init container of a Never pod follows %s", policies[0])
	}
}

// A pod stops its app containers (and an unfinished init container) first, then its sidecars
// one at a time, the last one first.
func TestStopOrderStopsSidecarsLastInReverse(t *testing.T) {
	pod := orderPod()
	var cs []kruntime.ContainerStatus
	for _, n := range []string{"app", "b", "log", "mesh", "worker"} {
		cs = append(cs, kruntime.ContainerStatus{Name: n, State: kruntime.StateRunning})
	}
	cs = append(cs, kruntime.ContainerStatus{Name: "a", State: kruntime.StateExited})
	var got [][]string
	for _, wave := range stopOrder(pod, &kruntime.SandboxStatus{Containers: cs}) {
		var ns []string
		for _, c := range wave {
			ns = append(ns, c.Name)
		}
		got = append(got, ns)
	}
	want := [][]string{{"app", "b", "worker"}, {"mesh"}, {"log"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("stop waves %v, want %v", got, want)
	}
}
