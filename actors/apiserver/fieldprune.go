package apiserver

import (
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/skiff-sh/skiff/schemas"
)

// A write changes part of an object: a kubelet's status write leaves the spec as stored, a
// controller's scale leaves the status. The field manager still converts both whole objects
// to typed values, validates and compares them, so an unchanged PodSpec costs it three walks
// per write. Which fields a write changed, added or removed depends only on where the two
// objects differ, so a top-level field equal in both contributes nothing; trackFull hands the
// field manager views of both objects with such fields left at their zero value, the same on
// both sides, and copies the managed fields it computes back onto the real object.

// trackFull is the field manager's Update of next over live by manager.
func trackFull(fm *managedfields.FieldManager, k *schemas.Kind, live, next runtime.Object, manager string) runtime.Object {
	lv, nv, ok := withoutUnchanged(k, live, next)
	if !ok {
		return fm.UpdateNoErrors(live, next, manager)
	}
	out := fm.UpdateNoErrors(lv, nv, manager)
	mustMeta(next).SetManagedFields(mustMeta(out).GetManagedFields())
	return next
}

// updateFields is the managed fields trackFull records, or the field manager's error.
func updateFields(fm *managedfields.FieldManager, k *schemas.Kind, live, next runtime.Object, manager string) ([]metav1.ManagedFieldsEntry, error) {
	lv, nv, ok := withoutUnchanged(k, live, next)
	if !ok {
		lv, nv = live, next
	}
	out, err := fm.Update(lv, nv, manager)
	if err != nil {
		return nil, err
	}
	return mustMeta(out).GetManagedFields(), nil
}

// withoutUnchanged returns shallow copies of live and next whose top-level fields other than
// metadata are zero wherever the two are equal, and ok false when there are none (or all are
// zero already) or the views would not give the field manager's result: entries of another
// API version are compared after a conversion, which may read fields of the whole object.
func withoutUnchanged(k *schemas.Kind, live, next runtime.Object) (runtime.Object, runtime.Object, bool) {
	lv, nv, ok := typedPair(live, next)
	if !ok || !oneVersion(k, mustMeta(live).GetManagedFields()) || !oneVersion(k, mustMeta(next).GetManagedFields()) {
		return nil, nil, false
	}
	var lc, nc reflect.Value
	t := lv.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || f.Anonymous || name == "" || name == "-" || name == "metadata" {
			continue
		}
		// A field zero in both is left out already (a create's status, an event's unset fields):
		// no view is needed for it. Fields are compared through pointers, not copied.
		fl, fn := lv.Field(i), nv.Field(i)
		if (fl.IsZero() && fn.IsZero()) || !reflect.DeepEqual(fl.Addr().Interface(), fn.Addr().Interface()) {
			continue
		}
		if !lc.IsValid() {
			lc, nc = reflect.New(t), reflect.New(t)
			lc.Elem().Set(lv)
			nc.Elem().Set(nv)
		}
		lc.Elem().Field(i).SetZero()
		nc.Elem().Field(i).SetZero()
	}
	if !lc.IsValid() {
		return nil, nil, false
	}
	return lc.Interface().(runtime.Object), nc.Interface().(runtime.Object), true
}

// oneVersion: every entry is of the kind's own API version.
func oneVersion(k *schemas.Kind, es []metav1.ManagedFieldsEntry) bool {
	gv := k.GVK.GroupVersion().String()
	for _, e := range es {
		if e.APIVersion != gv {
			return false
		}
	}
	return true
}
