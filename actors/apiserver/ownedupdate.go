package apiserver

import (
	"bytes"
	"reflect"
	"sort"
	"strings"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/skiff-sh/skiff/schemas"
)

// The commonest write is a manager rewriting values it alone already owns: a node's Lease
// renewTime every 10 s, a controller's counters. For such an Update structured-merge-diff
// changes nothing in the managed fields but that manager's timestamp, yet finding that out
// converts both objects to typed values and compares them (~0.2 ms and tens of KB a write).
// ownedUpdate finds it out from the Go values directly, and answers only when it is sure: any
// field appearing or disappearing, any changed list element, any value another manager owns
// or the writer does not, leaves the write to the full field manager.

// ownedUpdate returns next's managedFields when the write by manager only changes leaf values
// that manager owns alone through this endpoint (sub) at this version, and ok false when the
// full field manager must decide.
func ownedUpdate(k *schemas.Kind, sub string, live, next runtime.Object, manager string) (_ []metav1.ManagedFieldsEntry, ok bool) {
	if k.Custom != nil {
		return nil, false
	}
	liveFields := mustMeta(live).GetManagedFields()
	if len(liveFields) == 0 {
		return nil, false // the field manager decides whether to start tracking
	}
	// A write through the resource may set managedFields itself; only the live ones unchanged,
	// or none (the live ones kept), are the case here.
	if sent := mustMeta(next).GetManagedFields(); sub == "" && sent != nil && !sameEntries(sent, liveFields) {
		return nil, false
	}
	// A writer without an entry of its own (a kubelet's first status write) needs the field
	// manager whatever changed: found before walking the objects.
	gv := k.GVK.GroupVersion().String()
	self := -1
	for i, e := range liveFields {
		if writersEntry(e, manager, gv, sub) {
			self = i
		}
	}
	if self < 0 {
		return nil, false
	}
	lv, nv := reflect.ValueOf(live), reflect.ValueOf(next)
	if lv.Kind() != reflect.Pointer || lv.Type() != nv.Type() || lv.Elem().Kind() != reflect.Struct {
		return nil, false
	}
	var changed []fieldpath.Path
	if !changedLeaves(lv.Elem(), nv.Elem(), nil, &changed) {
		return nil, false
	}
	if len(changed) == 0 {
		return liveFields, true // nothing changed: no entry moves
	}
	for i, e := range liveFields {
		if e.FieldsV1 == nil {
			return nil, false
		}
		set, err := parsedFieldSets.get(e.FieldsV1.Raw)
		if err != nil {
			return nil, false
		}
		for _, p := range changed {
			if set.Has(p) != (i == self) {
				return nil, false
			}
		}
	}
	out := append([]metav1.ManagedFieldsEntry(nil), liveFields...)
	out[self].Time = &metav1.Time{Time: time.Now().UTC()}
	sortManagedFields(out)
	return out, true
}

// writersEntry: e is manager's own Update entry through endpoint sub at version gv, the one
// the field manager adds the write's fields to.
func writersEntry(e metav1.ManagedFieldsEntry, manager, gv, sub string) bool {
	return e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationUpdate && e.APIVersion == gv && e.Subresource == sub
}

// sortManagedFields orders entries as the field manager stores them: by operation, then by
// time (whole seconds), manager, API version and subresource.
func sortManagedFields(es []metav1.ManagedFieldsEntry) {
	unix := func(t *metav1.Time) int64 {
		if t == nil {
			return 0
		}
		return t.Unix()
	}
	sort.Slice(es, func(i, j int) bool {
		p, q := es[i], es[j]
		switch {
		case p.Operation != q.Operation:
			return p.Operation < q.Operation
		case unix(p.Time) != unix(q.Time):
			return unix(p.Time) < unix(q.Time)
		case p.Manager != q.Manager:
			return p.Manager < q.Manager
		case p.APIVersion != q.APIVersion:
			return p.APIVersion < q.APIVersion
		}
		return p.Subresource < q.Subresource
	})
}

// untrackedMeta are the metadata fields no manager owns (the field manager strips them).
var untrackedMeta = map[string]bool{"name": true, "namespace": true, "creationTimestamp": true, "selfLink": true,
	"uid": true, "clusterName": true, "generation": true, "managedFields": true, "resourceVersion": true}

// sameEntries compares managedFields as stored (times to the second).
func sameEntries(a, b []metav1.ManagedFieldsEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Manager != y.Manager || x.Operation != y.Operation || x.APIVersion != y.APIVersion || x.Subresource != y.Subresource ||
			x.FieldsType != y.FieldsType || !x.Time.Equal(y.Time) || (x.FieldsV1 == nil) != (y.FieldsV1 == nil) ||
			(x.FieldsV1 != nil && !bytes.Equal(x.FieldsV1.Raw, y.FieldsV1.Raw)) {
			return false
		}
	}
	return true
}

var scalarStructs = map[reflect.Type]bool{
	reflect.TypeFor[metav1.Time](): true, reflect.TypeFor[metav1.MicroTime](): true, reflect.TypeFor[metav1.Duration](): true,
	reflect.TypeFor[resource.Quantity](): true, reflect.TypeFor[intstr.IntOrString](): true,
}

// scalarEqual compares the types that serialise to one JSON scalar, which the field manager
// owns as leaves, as semantic equality does; ok is false for any other type.
func scalarEqual(a, b reflect.Value) (equal, ok bool) {
	if !scalarStructs[a.Type()] {
		return false, false // before Interface, which copies the struct to the heap
	}
	switch x := a.Interface().(type) {
	case metav1.Time:
		y := b.Interface().(metav1.Time)
		return x.Equal(&y), true
	case metav1.MicroTime:
		y := b.Interface().(metav1.MicroTime)
		return x.Equal(&y), true
	case metav1.Duration:
		return x == b.Interface().(metav1.Duration), true
	case resource.Quantity:
		return x.Cmp(b.Interface().(resource.Quantity)) == 0, true
	case intstr.IntOrString:
		return x == b.Interface().(intstr.IntOrString), true
	}
	return false, false
}

// changedLeaves appends the path of every scalar that differs between a and b (same type),
// reporting false for any change it cannot name as a leaf: a field, map key or list element
// added or removed, a changed list, a type it does not know.
func changedLeaves(a, b reflect.Value, path fieldpath.Path, out *[]fieldpath.Path) bool {
	t := a.Type()
	if a.Kind() == reflect.Struct {
		if equal, ok := scalarEqual(a, b); ok {
			if !equal {
				*out = append(*out, path)
			}
			return true
		}
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		if a.Kind() == reflect.Interface && a.Elem().Type() != b.Elem().Type() {
			return false
		}
		return changedLeaves(a.Elem(), b.Elem(), path, out)
	case reflect.Struct:
		return changedFields(a, b, path, out)
	case reflect.Map:
		if t.Key().Kind() != reflect.String || a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for it := a.MapRange(); it.Next(); {
			bv := b.MapIndex(it.Key())
			if !bv.IsValid() || !changedLeaves(it.Value(), bv, child(path, it.Key().String()), out) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		if t.Elem().Kind() == reflect.Uint8 { // []byte: one base64 string
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				*out = append(*out, path)
			}
			return true
		}
		// A list's elements are owned by key or as a whole: leave any change to the manager.
		return apiequality.Semantic.DeepEqual(a.Interface(), b.Interface())
	case reflect.Bool, reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		if !a.Equal(b) {
			*out = append(*out, path)
		}
		return true
	}
	return apiequality.Semantic.DeepEqual(a.Interface(), b.Interface())
}

// changedFields walks a struct's JSON fields; a field present (not omitted) on one side only
// is a change of shape.
func changedFields(a, b reflect.Value, path fieldpath.Path, out *[]fieldpath.Path) bool {
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" && opts == "" {
			continue
		}
		fa, fb := a.Field(i), b.Field(i)
		if name == "" && (f.Anonymous || strings.Contains(opts, "inline")) {
			if !changedLeaves(fa, fb, path, out) {
				return false
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		if skipped(path, name) {
			continue
		}
		pa, pb := present(fa, opts), present(fb, opts)
		if pa != pb {
			return false
		}
		if pa && !changedLeaves(fa, fb, child(path, name), out) {
			return false
		}
	}
	return true
}

// skipped: apiVersion, kind and the untracked metadata fields belong to no manager.
func skipped(path fieldpath.Path, name string) bool {
	switch len(path) {
	case 0:
		return name == "apiVersion" || name == "kind"
	case 1:
		return *path[0].FieldName == "metadata" && untrackedMeta[name]
	}
	return false
}

// present reports whether encoding/json writes the field.
func present(v reflect.Value, opts string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		switch o {
		case "omitempty":
			switch v.Kind() {
			case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
				if v.Len() == 0 {
					return false
				}
			case reflect.Pointer, reflect.Interface:
				if v.IsNil() {
					return false
				}
			default:
				if v.Kind() != reflect.Struct && v.IsZero() {
					return false
				}
			}
		case "omitzero":
			if isZero(v) {
				return false
			}
		}
	}
	return true
}

// isZero is omitzero's test: the type's IsZero method if it has one, else the zero value.
func isZero(v reflect.Value) bool {
	type zeroer interface{ IsZero() bool }
	if z, ok := v.Interface().(zeroer); ok {
		return z.IsZero()
	}
	if v.CanAddr() {
		if z, ok := v.Addr().Interface().(zeroer); ok {
			return z.IsZero()
		}
	}
	return v.IsZero()
}

// child is path with one more field (a new slice: paths are kept).
func child(path fieldpath.Path, name string) fieldpath.Path {
	out := make(fieldpath.Path, len(path), len(path)+1)
	copy(out, path)
	return append(out, fieldpath.PathElement{FieldName: &name})
}
