package apiserver

import (
	"encoding/binary"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/schemas"
)

// A ReplicaSet controller creates thousands of pods from one template, and the field manager's
// run on each create (~75 µs a pod, mostly typed.Compare) finds the same entry every time.
// Against a create's empty live object the manager's entry is the set of paths where the new
// object differs from the kind's zero value, less what stripMeta removes from every entry
// (apiVersion, kind, metadata itself and its name, namespace, uid, creationTimestamp,
// selfLink, generation, managedFields, resourceVersion: all leaves). So the create's
// managedFields are a function of the kind, endpoint, manager and the rest of the object,
// but for the time stamp, and trackCreate memoises them by the protobuf encoding of the object
// with those fields cleared; events, each unlike the others, by their shape (fmshape.go).
//
// What that encoding cannot tell apart: TypeMeta (not encoded; its strings join the key), and
// a nil from an empty slice or map (both encoded as nothing). The latter matters only where
// the empty live object holds the field too, as null: a field without omitempty reached from
// the root through struct fields (a pod's spec.containers), where null equals the live value
// and is not recorded but [] is. The key carries a bit per such field. Anywhere the live
// object lacks, Compare records null and [] alike (the path as a leaf). Path elements are
// keys and set values, which the encoding keeps exactly; it is finer elsewhere (times to the
// nanosecond), which only costs misses.
//
// Left to the plain path: entries the client sent on a create (the field manager keeps
// them), kinds of other schemas (custom resources, apiextensions), objects without a
// generated protobuf encoding, and any run of the field manager that fails.

// createFields memoises a create's managedFields by createKey. An entry is only copied from.
var createFields byContent[[]metav1.ManagedFieldsEntry]

// createFieldsHits counts creates answered from createFields (tests read it).
var createFieldsHits atomic.Int64

// maxCreateKey bounds a memoised create's key, so the memo holds at most a few MB: objects
// created by the thousand from one template are small (a pod's ~2 KB).
const maxCreateKey = 16 << 10

var keyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// trackCreate records a create's managedFields as trackUpdate would against an empty live
// object, from createFields when an object of the same content was created before.
func trackCreate(k *schemas.Kind, obj runtime.Object, wo writeOptions) runtime.Object {
	if wo.applied {
		return obj
	}
	live := func() runtime.Object { o := k.New(); setTypeMeta(o, k); return o }
	sub := wo.trackAs
	manager := managerOf(wo)
	bp := keyBuffers.Get().(*[]byte)
	key, ok := createKey((*bp)[:0], k, sub, manager, obj)
	if cap(key) <= maxCreateKey {
		*bp = key[:0]
		defer keyBuffers.Put(bp)
	}
	if !ok {
		return trackUpdate(k, "", live(), obj, wo)
	}
	fm, err := fieldManagerFor(k, sub)
	if err != nil {
		return trackUpdate(k, "", live(), obj, wo)
	}
	computed := false
	fields, err := createFields.lookup(key, func([]byte) ([]metav1.ManagedFieldsEntry, error) {
		computed = true
		made, err := updateFields(fm, k, live(), obj, manager)
		if err != nil {
			return nil, err
		}
		mustMeta(obj).SetManagedFields(made)
		return copyEntries(made, nil), nil
	})
	switch {
	case err != nil: // the plain path's result, its error logged and the live entries kept
		return trackUpdate(k, "", live(), obj, wo)
	case !computed:
		createFieldsHits.Add(1)
		now := time.Now().UTC() // as the field manager stamps an entry
		mustMeta(obj).SetManagedFields(copyEntries(fields, &now))
	}
	return obj
}

// copyEntries is a deep copy of entries, their times set to at when given.
func copyEntries(entries []metav1.ManagedFieldsEntry, at *time.Time) []metav1.ManagedFieldsEntry {
	if entries == nil {
		return nil
	}
	out := make([]metav1.ManagedFieldsEntry, len(entries))
	for i := range entries {
		entries[i].DeepCopyInto(&out[i])
		if at != nil {
			out[i].Time = &metav1.Time{Time: *at}
		}
	}
	return out
}

// createKey appends to buf what a create's managedFields depend on, and ok false when they
// may depend on more (see above). obj's stripped metadata is cleared for the encoding and put
// back.
func createKey(buf []byte, k *schemas.Kind, sub, manager string, obj runtime.Object) (_ []byte, ok bool) {
	return createKeyBy(buf, k, sub, manager, obj, shapeKeyed(k.GVK.Kind))
}

// createKeyBy is createKey by the object's encoding, or by its shape.
func createKeyBy(buf []byte, k *schemas.Kind, sub, manager string, obj runtime.Object, byShape bool) (_ []byte, ok bool) {
	if k.Custom != nil {
		return buf, false
	}
	if !builtinSchema(k) {
		return buf, false
	}
	enc, isProto := obj.(runtime.ProtobufReverseMarshaller) // gogo's, as every k8s.io/api type has
	om, isMeta := objectMeta(obj)
	v := reflect.ValueOf(obj)
	if !isProto || !isMeta || v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return buf, false
	}
	// A subresource's field manager ignores the entries sent; the resource's keeps them unless
	// they are none or the reset form.
	if sub == "" && !noEntries(om.ManagedFields) {
		return buf, false
	}
	tm := obj.GetObjectKind().GroupVersionKind()
	for _, s := range []string{k.GVK.Group, k.GVK.Version, k.GVK.Kind, sub, manager, tm.Group, tm.Version, tm.Kind} {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	for _, idx := range nullAtRoot(v.Elem().Type()) {
		if v.Elem().FieldByIndex(idx).IsNil() {
			buf = append(buf, 0)
		} else {
			buf = append(buf, 1)
		}
	}
	saved := *om
	defer func() { *om = saved }()
	*om = tracked(saved)
	if byShape {
		buf = append(buf, 's')
		if buf, ok = appendShape(buf, v.Elem()); !ok || len(buf) > maxCreateKey {
			return buf, false
		}
		return buf, true
	}
	n := enc.Size()
	if len(buf)+n > maxCreateKey {
		return buf, false
	}
	start := len(buf)
	buf = slices.Grow(buf, n)[:start+n]
	if _, err := enc.MarshalToSizedBuffer(buf[start:]); err != nil {
		return buf[:start], false
	}
	return buf, true
}

var builtinSchemas sync.Map // *schemas.Kind -> bool

// builtinSchema: k's field manager converts with builtinTypes (typeConverterFor makes an
// object to find out, so the answer is kept).
func builtinSchema(k *schemas.Kind) bool {
	if v, ok := builtinSchemas.Load(k); ok {
		return v.(bool)
	}
	tc, err := typeConverterFor(k.GVK)
	is := err == nil && tc == builtinTypes()
	builtinSchemas.Store(k, is)
	return is
}

// noEntries: sent managedFields the field manager of a create replaces with none (none, an
// empty list, or the single empty entry that resets them).
func noEntries(sent []metav1.ManagedFieldsEntry) bool {
	return len(sent) == 0 || (len(sent) == 1 && reflect.DeepEqual(sent[0], metav1.ManagedFieldsEntry{}))
}

var nullFields sync.Map // reflect.Type -> [][]int

// nullAtRoot are the index paths of a kind's slice and map fields without omitempty reached
// from the root through struct fields: those an empty live object holds as null.
func nullAtRoot(t reflect.Type) [][]int {
	if v, ok := nullFields.Load(t); ok {
		return v.([][]int)
	}
	var out [][]int
	var walk func(t reflect.Type, at []int)
	walk = func(t reflect.Type, at []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			idx := append(slices.Clip(at), i)
			switch f.Type.Kind() {
			case reflect.Slice, reflect.Map:
				if !slices.Contains(strings.Split(opts, ","), "omitempty") {
					out = append(out, idx)
				}
			case reflect.Struct:
				if !reflect.PointerTo(f.Type).Implements(marshalerType) {
					walk(f.Type, idx)
				}
			}
		}
	}
	walk(t, nil)
	nullFields.Store(t, out)
	return out
}
