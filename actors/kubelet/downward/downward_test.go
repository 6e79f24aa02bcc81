package downward_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/kubelet/downward"
)

func TestValues(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"b": "2", "a": `say "hi"`}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")},
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100Mi")},
		}}}},
	}
	n := downward.Node{PodIP: "10.0.0.2", HostIP: "192.168.1.1", Allocatable: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}}
	for path, want := range map[string]string{
		"metadata.labels": "a=\"say \\\"hi\\\"\"\nb=\"2\"", "metadata.labels['b']": "2", "metadata.namespace": "ns",
		"status.podIP": "10.0.0.2", "status.hostIP": "192.168.1.1",
	} {
		if got, err := downward.FieldValue(pod, path, n); err != nil || got != want {
			t.Errorf("%s = %q (%v), want %q", path, got, err, want)
		}
	}
	if _, err := downward.FieldValue(pod, "spec.nothing", n); err == nil {
		t.Error("an unknown fieldPath was accepted")
	}
	for _, c := range []struct {
		res, divisor, want string
	}{
		{"limits.cpu", "", "2"},      // 1.5 cores rounded up
		{"limits.cpu", "1m", "1500"}, // in millicores
		{"requests.memory", "1Mi", "100"},
		{"limits.memory", "1Gi", "2"}, // unset: the node's allocatable
		{"requests.cpu", "", "0"},
	} {
		ref := &corev1.ResourceFieldSelector{Resource: c.res}
		if c.divisor != "" {
			ref.Divisor = resource.MustParse(c.divisor)
		}
		if got, err := downward.ResourceValue(pod, "c", ref, n); err != nil || got != c.want {
			t.Errorf("%s/%s = %q (%v), want %q", c.res, c.divisor, got, err, c.want)
		}
	}
	if _, err := downward.ResourceValue(pod, "c", &corev1.ResourceFieldSelector{Resource: "limits.gpu"}, n); err == nil {
		t.Error("an unknown resource was accepted")
	}
	if _, err := downward.ResourceValue(pod, "nope", &corev1.ResourceFieldSelector{Resource: "limits.cpu"}, n); err == nil {
		t.Error("an unknown container was accepted")
	}
}
