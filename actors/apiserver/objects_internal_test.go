package apiserver

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/schemas"
)

func TestSpecChangedOnTypedAndUnstructured(t *testing.T) {
	base := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(2)), Template: benchPodTemplate("1")}}
	change := func(f func(*appsv1.Deployment)) *appsv1.Deployment {
		d := base.DeepCopy()
		f(d)
		return d
	}
	cases := []struct {
		name string
		next *appsv1.Deployment
		want bool
	}{
		{"replicas", change(func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To(int32(3)) }), true},
		{"a container's request", change(func(d *appsv1.Deployment) { d.Spec.Template = benchPodTemplate("2") }), true},
		{"status only", change(func(d *appsv1.Deployment) { d.Status.Replicas = 5 }), false},
		{"metadata only", change(func(d *appsv1.Deployment) { d.Labels = map[string]string{"a": "b"}; d.Kind = "Deployment" }), false},
		{"the same request spelt otherwise", change(func(d *appsv1.Deployment) { d.Spec.Template = benchPodTemplate("1000m") }), false},
		{"an empty list for none", change(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Volumes = []corev1.Volume{} }), false},
	}
	for _, c := range cases {
		if got := specChanged(base, c.next); got != c.want {
			t.Errorf("%s: specChanged = %v, want %v", c.name, got, c.want)
		}
		u := func(o runtime.Object) *unstructured.Unstructured {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
			if err != nil {
				t.Fatal(err)
			}
			return &unstructured.Unstructured{Object: m}
		}
		if c.name != "the same request spelt otherwise" { // as JSON, "1" and "1000m" differ
			if got := specChanged(u(base), u(c.next)); got != c.want {
				t.Errorf("%s, unstructured: specChanged = %v, want %v", c.name, got, c.want)
			}
		}
	}
}

func benchPodTemplate(cpu string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
}

// The section comes over as a copy: writing the result never changes the object it came from
// (the stored one, shared with readers).
func TestWithSectionCopiesTheSection(t *testing.T) {
	k, _ := schemas.ByResource("", "v1", "pods")
	stored := benchPod()
	stored.Status.Phase = corev1.PodRunning
	stored.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	next := benchPod()
	next.Spec.Containers[0].Image = "img:2"
	out, err := withSection(k, next, stored, "status")
	if err != nil {
		t.Fatal(err)
	}
	p := out.(*corev1.Pod)
	if p.Status.Phase != corev1.PodRunning || p.Spec.Containers[0].Image != "img:2" || p.Kind != "Pod" {
		t.Fatalf("status not taken from the stored pod or spec not kept: %+v", p)
	}
	p.Status.Conditions[0].Status = corev1.ConditionFalse
	if stored.Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Fatal("writing the result's status changed the stored pod's")
	}
}

// A status write keeps the stored spec (shared, not copied, never written) and takes the
// request's status defaulted, with the stored QoS class when the request has none.
func TestStatusOntoSharesTheStoredSpecAndDefaultsTheStatus(t *testing.T) {
	k, _ := schemas.ByResource("", "v1", "pods")
	stored := benchPod()
	stored.Status.QOSClass = corev1.PodQOSBurstable
	pristine := stored.DeepCopy()
	next := benchPod()
	next.Spec.Containers[0].Image = "img:2"
	next.Status = corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	out, defaulted, err := statusOnto(k, stored, next)
	if err != nil || !defaulted {
		t.Fatalf("statusOnto: defaulted %v, %v", defaulted, err)
	}
	p := out.(*corev1.Pod)
	if &p.Spec.Containers[0] != &stored.Spec.Containers[0] {
		t.Fatal("the stored spec was copied, or replaced by the request's")
	}
	if p.Status.Phase != corev1.PodPending || p.Status.QOSClass != corev1.PodQOSBurstable || len(p.Status.Conditions) != 1 || p.Kind != "Pod" {
		t.Fatalf("status not the request's, defaulted, with the stored QoS class: %+v", p.Status)
	}
	if !apiequality.Semantic.DeepEqual(stored, pristine) {
		t.Fatalf("the stored pod changed: %s", diff.Diff(pristine, stored))
	}
}
