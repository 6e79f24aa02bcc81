package statefulset

import (
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOrdinalOf(t *testing.T) {
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	for name, want := range map[string]int{
		"web-0": 0, "web-12": 12, "web-": -1, "web-01": -1, "web-1-2": -1, "web-x": -1, "webb-1": -1, "other-1": -1, "web--1": -1,
	} {
		if got := ordinalOf(s, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}); got != want {
			t.Errorf("%s: %d; want %d", name, got, want)
		}
	}
}

func TestRevisionDataRestoresTheTemplate(t *testing.T) {
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: appsv1.StatefulSetSpec{
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img:1"}}}},
	}}
	data, err := revisionData(s)
	if err != nil {
		t.Fatal(err)
	}
	// kubectl rollout undo applies the data as a strategic merge patch that replaces the template.
	var patch map[string]map[string]map[string]any
	if err := json.Unmarshal(data, &patch); err != nil || patch["spec"]["template"]["$patch"] != "replace" {
		t.Fatalf("data %s: %v", data, err)
	}
	r := newRevision(s, data, 3, 0)
	got, err := templateOf(r)
	if err != nil || !apiequality.Semantic.DeepEqual(got, &s.Spec.Template) {
		t.Fatalf("template back %+v, %v", got, err)
	}
	if r.Revision != 3 || r.Labels["app"] != "web" || r.Name != "web-"+r.Labels[RevisionLabel] || !metav1.IsControlledBy(r, s) {
		t.Fatalf("revision %+v", r.ObjectMeta)
	}
	if other := newRevision(s, data, 3, 1); other.Name == r.Name {
		t.Fatalf("a collision count does not change the name %s", r.Name)
	}
}
