package informer

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The cache's copy of a shared object drops managedFields from its own top level only: the
// shared object keeps them, and what lies below is the same memory.
func TestWithoutManagedFieldsLeavesTheSharedObjectWhole(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", ResourceVersion: "7", Labels: map[string]string{"a": "b"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
	}
	got := withoutManagedFields(pod).(*corev1.Pod)
	switch {
	case got == pod || got.ManagedFields != nil || len(pod.ManagedFields) != 1:
		t.Fatalf("copy %p managedFields %v, shared %p managedFields %v", got, got.ManagedFields, pod, pod.ManagedFields)
	case got.Name != "p" || got.ResourceVersion != "7" || &got.Spec.Containers[0] != &pod.Spec.Containers[0]:
		t.Fatalf("copy %+v does not share the rest of the pod", got)
	}

	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "resourceVersion": "7", "managedFields": []any{map[string]any{"manager": "m"}}},
		"spec":     map[string]any{"size": int64(3)},
	}}
	gu := withoutManagedFields(u).(*unstructured.Unstructured)
	if _, ok := gu.Object["metadata"].(map[string]any)["managedFields"]; ok || len(u.GetManagedFields()) != 1 {
		t.Fatalf("copy managedFields %v, shared %v", gu.GetManagedFields(), u.GetManagedFields())
	}
	if gu.GetName() != "w" || gu.GetResourceVersion() != "7" || gu.GetKind() != "Widget" {
		t.Fatalf("copy %v lost the object's metadata or type", gu.Object)
	}
	gu.Object["spec"].(map[string]any)["size"] = int64(4) // below the top level: shared
	if u.Object["spec"].(map[string]any)["size"] != int64(4) {
		t.Fatal("the copy's spec is not the shared object's")
	}
}
