package garbagecollector

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestGraphChangedSeesEveryReferenceField: the typed comparison must see a change of any
// field of a reference (as the reflective one did) and nothing else.
func TestGraphChangedSeesEveryReferenceField(t *testing.T) {
	base := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "u1", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false)}
	meta := func(refs ...metav1.OwnerReference) *metav1.ObjectMeta {
		return &metav1.ObjectMeta{Name: "x", OwnerReferences: refs, Labels: map[string]string{"a": "b"}}
	}
	edits := map[string]func(*metav1.OwnerReference){
		"apiVersion":             func(r *metav1.OwnerReference) { r.APIVersion = "v2" },
		"kind":                   func(r *metav1.OwnerReference) { r.Kind = "Pod" },
		"name":                   func(r *metav1.OwnerReference) { r.Name = "n2" },
		"uid":                    func(r *metav1.OwnerReference) { r.UID = "u2" },
		"controller value":       func(r *metav1.OwnerReference) { r.Controller = ptr.To(false) },
		"controller unset":       func(r *metav1.OwnerReference) { r.Controller = nil },
		"blockOwnerDeletion":     func(r *metav1.OwnerReference) { r.BlockOwnerDeletion = ptr.To(true) },
		"blockOwnerDeletion nil": func(r *metav1.OwnerReference) { r.BlockOwnerDeletion = nil },
	}
	for name, edit := range edits {
		r := base
		edit(&r)
		if !graphChanged(meta(base), meta(r)) {
			t.Errorf("%s changed, graphChanged = false", name)
		}
	}
	same := base
	same.Controller, same.BlockOwnerDeletion = ptr.To(true), ptr.To(false) // equal values, other pointers
	other := meta(same)
	other.Labels = map[string]string{"c": "d"}
	if graphChanged(meta(base), other) {
		t.Error("equal references (other pointers) and a label change: graphChanged = true")
	}
	if graphChanged(meta(), &metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{}}) {
		t.Error("nil and empty references differ")
	}
	if !graphChanged(meta(base), meta(base, base)) || !graphChanged(meta(base), meta()) {
		t.Error("a reference added or removed: graphChanged = false")
	}
	fin := meta(base)
	fin.Finalizers = []string{metav1.FinalizerOrphanDependents}
	if !graphChanged(meta(base), fin) {
		t.Error("finalizer added: graphChanged = false")
	}
	del := meta(base)
	del.DeletionTimestamp = &metav1.Time{}
	if !graphChanged(meta(base), del) {
		t.Error("deletion set: graphChanged = false")
	}
}
