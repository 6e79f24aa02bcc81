package printers_test

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/schemas/printers"
)

func TestStatefulSetAndRevisionRows(t *testing.T) {
	if got := names(printers.Table("statefulsets", nil, now), false); !reflect.DeepEqual(got, []string{"Name", "Ready", "Age"}) {
		t.Errorf("statefulsets columns: %v", got)
	}
	if got := names(printers.Table("controllerrevisions", nil, now), false); !reflect.DeepEqual(got, []string{"Name", "Controller", "Revision", "Age"}) {
		t.Errorf("controllerrevisions columns: %v", got)
	}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: ago(2 * time.Minute)},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr(int32(3)),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.27"}}}}},
		Status: appsv1.StatefulSetStatus{ReadyReplicas: 2},
	}
	if got, want := row(t, "statefulsets", sts), []any{"web", "2/3", "2m", "nginx", "nginx:1.27"}; !reflect.DeepEqual(got, want) {
		t.Errorf("statefulset row: %v; want %v", got, want)
	}
	rev := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: "web-7c9f", CreationTimestamp: ago(time.Minute), OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", Controller: ptr(true)}}},
		Revision: 2,
	}
	if got, want := row(t, "controllerrevisions", rev), []any{"web-7c9f", "statefulset.apps/web", int64(2), "60s"}; !reflect.DeepEqual(got, want) {
		t.Errorf("revision row: %v; want %v", got, want)
	}
}
