package apiserver

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/skiff-sh/skiff/schemas"
)

// A write changes part of an object: a kubelet's status write leaves the spec as stored, a
// controller's scale leaves the status. The field manager still converts both whole objects
// to typed values, validates and compares them, so an unchanged PodSpec costs it three walks
// per write. Which fields a write changed, added or removed depends only on where the two
// objects differ, so a top-level field equal in both contributes nothing; trackFull hands the
// field manager views of both objects with such fields left at their zero value, the same on
// both sides, and copies the managed fields it computes back onto the real object.

// The same holds of the managed fields: the field manager decodes every entry, takes the
// changed paths out of each and encodes them all again, though an entry owning nothing under a
// changed top-level field comes out as it went in. A pod's creator's entry (its whole spec,
// most of the bytes) is such an entry for every status write. So trackFull gives the field
// manager only the entries the write may change: the writer's own and those owning a path
// under a changed field, metadata counting as changed unless its tracked fields are equal.
// The others join its answer as they were, ordered as it orders entries. Left whole: entries
// the client sent (the field manager may take them instead of the stored ones), entries not
// in the form the field manager writes, and objects near the cap on update entries, which
// folds the oldest by looking at all of them.

// trackFull is the field manager's Update of next over live by manager through endpoint sub.
func trackFull(fm *managedfields.FieldManager, k *schemas.Kind, sub string, live, next runtime.Object, manager string) runtime.Object {
	lv, nv, changed, ok := withoutUnchanged(k, live, next)
	if !ok {
		return fm.UpdateNoErrors(live, next, manager)
	}
	liveFields := mustMeta(live).GetManagedFields()
	given, kept, split := splitEntries(k, sub, manager, liveFields, mustMeta(next).GetManagedFields(), changed, metadataChanged(live, next))
	var standFor *metav1.ManagedFieldsEntry // the kept entry a stand-in replaces
	if split && len(given) == 0 {
		// Given no entry at all the field manager stops tracking the object: it gets one
		// kept entry cut to a single path, which the write cannot touch either.
		in, ok := standIn(kept[0])
		if !ok {
			return fm.UpdateNoErrors(live, next, manager)
		}
		standFor = &kept[0]
		given, kept = []metav1.ManagedFieldsEntry{in}, kept[1:]
	}
	if split {
		mustMeta(lv).SetManagedFields(given)
		if mustMeta(nv).GetManagedFields() != nil {
			mustMeta(nv).SetManagedFields(given)
		}
	}
	out := mustMeta(fm.UpdateNoErrors(lv, nv, manager)).GetManagedFields()
	if split {
		if standFor != nil {
			i := slices.IndexFunc(out, func(e metav1.ManagedFieldsEntry) bool { return sameEntries([]metav1.ManagedFieldsEntry{e}, given) })
			if i < 0 { // not given back as it went in: the plain path
				return fm.UpdateNoErrors(live, next, manager)
			}
			out[i] = *standFor
		}
		out = append(out, kept...)
		sortManagedFields(out)
	}
	mustMeta(next).SetManagedFields(out)
	return next
}

// splitEntries parts live's entries into those the field manager must see (the writer's, and
// those owning a path under a changed top-level field) and those it would leave as they are;
// ok is false when it must see them all.
func splitEntries(k *schemas.Kind, sub, manager string, live, sent []metav1.ManagedFieldsEntry, changed []string, metadataChanged bool) (given, kept []metav1.ManagedFieldsEntry, ok bool) {
	if len(live) == 0 || len(live) >= maxUpdateEntries || (sub == "" && sent != nil && !sameEntries(sent, live)) {
		return nil, nil, false
	}
	if metadataChanged {
		changed = append(slices.Clip(changed), "metadata")
	}
	gv := k.GVK.GroupVersion().String()
	for _, e := range live {
		if writersEntry(e, manager, gv, sub) {
			given = append(given, e)
			continue
		}
		if e.FieldsV1 == nil {
			return nil, nil, false
		}
		set, err := parsedFieldSets.get(e.FieldsV1.Raw)
		if err != nil || !canonicalFieldSet(e.FieldsV1.Raw) {
			return nil, nil, false
		}
		if ownsUnder(set, changed) {
			given = append(given, e)
		} else {
			kept = append(kept, e)
		}
	}
	return given, kept, len(kept) > 0
}

var standInSets byContent[[]byte]

// standIn is e with its fields cut to one of its paths.
func standIn(e metav1.ManagedFieldsEntry) (metav1.ManagedFieldsEntry, bool) {
	raw, err := standInSets.lookup(e.FieldsV1.Raw, func(raw []byte) ([]byte, error) {
		set, err := parsedFieldSets.get(raw)
		if err != nil {
			return nil, err
		}
		p, ok := onePath(set, nil)
		if !ok {
			return nil, errors.New("an empty set")
		}
		return fieldpath.NewSet(p).ToJSON()
	})
	if err != nil {
		return e, false
	}
	e.FieldsV1 = &metav1.FieldsV1{Raw: raw}
	return e, true
}

// onePath is a path set holds, under prefix (the set's All cannot stop early).
func onePath(set *fieldpath.Set, prefix fieldpath.Path) (fieldpath.Path, bool) {
	var first *fieldpath.PathElement
	set.Members.Iterate(func(pe fieldpath.PathElement) {
		if first == nil {
			first = &pe
		}
	})
	if first != nil {
		return append(prefix.Copy(), *first), true
	}
	set.Children.Iterate(func(pe fieldpath.PathElement) {
		if first == nil {
			first = &pe
		}
	})
	if first == nil {
		return nil, false
	}
	child, _ := set.Children.Get(*first)
	return onePath(child, append(prefix.Copy(), *first))
}

// maxUpdateEntries: with this many entries a write may bring the update entries past the
// field manager's cap (10), and the cap folds the oldest of all of them.
const maxUpdateEntries = 10

// ownsUnder: set holds a top-level field of names, or a path under one.
func ownsUnder(set *fieldpath.Set, names []string) bool {
	for _, name := range names {
		pe := fieldpath.PathElement{FieldName: &name}
		if set.Members.Has(pe) {
			return true
		}
		if _, ok := set.Children.Get(pe); ok {
			return true
		}
	}
	return false
}

var canonicalFieldSets byContent[bool]

// canonicalFieldSet: raw is a set as the field manager encodes it, so an entry kept as
// stored reads as the field manager would have written it again.
func canonicalFieldSet(raw []byte) bool {
	is, _ := canonicalFieldSets.lookup(raw, func(raw []byte) (bool, error) {
		set, err := parsedFieldSets.get(raw)
		if err != nil {
			return false, nil
		}
		again, err := set.ToJSON()
		return err == nil && bytes.Equal(again, raw), nil
	})
	return is
}

// metadataChanged: the metadata fields managers own differ between live and next.
func metadataChanged(live, next runtime.Object) bool {
	lm, lok := objectMeta(live)
	nm, nok := objectMeta(next)
	return !lok || !nok || !apiequality.Semantic.DeepEqual(tracked(*lm), tracked(*nm))
}

// objectMeta is a typed object's metadata.
func objectMeta(obj runtime.Object) (*metav1.ObjectMeta, bool) {
	a, ok := obj.(metav1.ObjectMetaAccessor)
	if !ok {
		return nil, false
	}
	m, ok := a.GetObjectMeta().(*metav1.ObjectMeta)
	return m, ok
}

// tracked is m without the fields no manager owns (untrackedMeta).
func tracked(m metav1.ObjectMeta) metav1.ObjectMeta {
	m.Name, m.Namespace, m.UID, m.SelfLink, m.ResourceVersion = "", "", "", "", ""
	m.CreationTimestamp, m.Generation, m.ManagedFields = metav1.Time{}, 0, nil
	return m
}

// updateFields is the managed fields trackFull records, or the field manager's error.
func updateFields(fm *managedfields.FieldManager, k *schemas.Kind, live, next runtime.Object, manager string) ([]metav1.ManagedFieldsEntry, error) {
	lv, nv, _, ok := withoutUnchanged(k, live, next)
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
// metadata are zero wherever the two are equal, the JSON names of those that differ, and ok
// false when there are none (or all are zero already) or the views would not give the field
// manager's result: entries of another API version are compared after a conversion, which
// may read fields of the whole object.
func withoutUnchanged(k *schemas.Kind, live, next runtime.Object) (_, _ runtime.Object, changed []string, ok bool) {
	lv, nv, ok := typedPair(live, next)
	if !ok || !oneVersion(k, mustMeta(live).GetManagedFields()) || !oneVersion(k, mustMeta(next).GetManagedFields()) {
		return nil, nil, nil, false
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
		if fl.IsZero() && fn.IsZero() {
			continue
		}
		if !reflect.DeepEqual(fl.Addr().Interface(), fn.Addr().Interface()) {
			changed = append(changed, name)
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
		return nil, nil, nil, false
	}
	return lc.Interface().(runtime.Object), nc.Interface().(runtime.Object), changed, true
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
