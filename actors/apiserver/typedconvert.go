package apiserver

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/managedfields"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// The field manager turns the stored and the new object into typed values with
// typed.AsTyped, whose validation walks the whole object against the schema before Compare
// walks both again: half the field manager's CPU on a pod create. For a Go object of a
// k8s.io/api kind that walk finds nothing, the schema being generated from the same Go types,
// except where a Go type allows what its schema does not: a list-map item whose every key
// field may be omitted (ServiceAccount.secrets), and the types converted through their JSON,
// whose conversion may fail (an IntOrString of neither type, a RawExtension of broken JSON)
// or give a shape the schema refuses (a managedFields entry's fieldsV1 that is not an
// object). Compare cannot stand in for validation: it does not look inside atomic lists and
// maps nor the items of a duplicated key, and takes a non-map where a map belongs for absent.
// So unvalidatedTypes skips the walk only where it provably passes: each Go type is checked
// against its schema type once, field by field (what validation would refuse of a value the
// type can hold makes the type validated as before), and the JSON-converted values that may
// fail are converted per object as validation would. The typed value is then the one AsTyped
// returns, so the managed fields are byte for byte the same; everything else (unstructured
// objects, conversions refusing duplicates) is the library's own conversion.

// unvalidatedTypes is tc (client-go's structured-merge-diff schema of k8s.io/api) without
// the validation walk for typed objects that cannot fail it.
type unvalidatedTypes struct {
	tc     managedfields.TypeConverter
	scheme *runtime.Scheme
	schema *smdschema.Schema // tc's own parsed schema (Compare wants both sides' to be one)
	plans  sync.Map          // planKey -> *typePlan, nil when the type must be validated
}

type planKey struct {
	gvk schema.GroupVersionKind
	t   reflect.Type
}

// typePlan is a Go type's schema type and what must be checked per value.
type typePlan struct {
	ref   smdschema.TypeRef
	check *valueCheck // nil: none needed
}

func newUnvalidatedTypes(tc managedfields.TypeConverter, scheme *runtime.Scheme) (*unvalidatedTypes, error) {
	// The library keeps its parser to itself; a value it converts carries the schema.
	probe := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	tv, err := tc.ObjectToTyped(probe)
	if err != nil {
		return nil, fmt.Errorf("finding the type converter's schema: %w", err)
	}
	return &unvalidatedTypes{tc: tc, scheme: scheme, schema: tv.Schema()}, nil
}

// ObjectToTyped is the library's conversion, without its validation when that cannot fail.
func (c *unvalidatedTypes) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	if ref, ok := c.unvalidated(obj, opts); ok {
		if v, err := value.NewValueReflect(obj); err == nil {
			return typed.AsTypedUnvalidated(v, c.schema, ref), nil
		}
	}
	return c.tc.ObjectToTyped(obj, opts...)
}

// unvalidated is obj's schema type when validating obj as the options ask cannot fail. Only
// conversions allowing duplicate keys qualify (the field manager's of stored and new
// objects); unstructured objects (applied configurations, anything built from JSON) do not.
func (c *unvalidatedTypes) unvalidated(obj runtime.Object, opts []typed.ValidationOptions) (smdschema.TypeRef, bool) {
	if _, u := obj.(runtime.Unstructured); u || !slices.Contains(opts, typed.AllowDuplicates) {
		return smdschema.TypeRef{}, false
	}
	p := c.plan(obj)
	if p == nil || !p.check.ok(reflect.ValueOf(obj)) {
		return smdschema.TypeRef{}, false
	}
	return p.ref, true
}

func (c *unvalidatedTypes) TypedToObject(tv *typed.TypedValue) (runtime.Object, error) {
	return c.tc.TypedToObject(tv)
}

// plan is obj's Go type's plan for the schema type its kind names, worked out once.
func (c *unvalidatedTypes) plan(obj runtime.Object) *typePlan {
	key := planKey{obj.GetObjectKind().GroupVersionKind(), reflect.TypeOf(obj)}
	if p, ok := c.plans.Load(key); ok {
		return p.(*typePlan)
	}
	var p *typePlan
	// The library's name for the kind's schema type, as it looks it up per conversion.
	if name, err := c.scheme.ToOpenAPIDefinitionName(key.gvk); err == nil && key.t.Kind() == reflect.Pointer {
		ref := smdschema.TypeRef{NamedType: &name}
		cc := conformance{s: c.schema, done: map[conformKey]*valueCheck{}}
		if check, ok := cc.check(key.t, ref); ok {
			p = &typePlan{ref: ref, check: check}
		}
	}
	actual, _ := c.plans.LoadOrStore(key, p)
	return actual.(*typePlan)
}

// valueCheck tells whether a Go value converts as its schema type takes it, where its type
// alone does not say: types converted through their JSON whose conversion may fail or give
// another shape.
type valueCheck struct {
	f func(reflect.Value) bool // nil: nothing to check (yet, while a recursive type is worked out)
}

func (r *valueCheck) ok(v reflect.Value) bool { return r == nil || r.f == nil || r.f(v) }

// converts is the library's own conversion of a value of a JSON-converted type: whether it
// succeeds, giving a shape the schema type takes.
func converts(t reflect.Type, takes func(any) bool) func(reflect.Value) bool {
	e := value.TypeReflectEntryOf(t)
	return func(v reflect.Value) bool {
		u, err := e.ToUnstructured(v)
		return err == nil && takes(u)
	}
}

func anyShape(any) bool { return true }

// mapOrNull: the fieldsV1 schema type is a map (any JSON inside).
func mapOrNull(u any) bool {
	_, isMap := u.(map[string]any)
	return u == nil || isMap
}

// fieldSetsConvert memoises fieldsV1's conversion by content, which alone decides it: the
// entries of one manager and kind repeat across objects, their decode is most of the check.
var fieldSetsConvert byContent[bool]

var fieldsV1Converts = converts(fieldsV1Type, mapOrNull)

func fieldsV1OK(v reflect.Value) bool {
	var raw []byte
	if v.CanAddr() {
		raw = v.Addr().Interface().(*metav1.FieldsV1).GetRawBytes()
	} else {
		f := v.Interface().(metav1.FieldsV1)
		raw = f.GetRawBytes()
	}
	ok, _ := fieldSetsConvert.lookup(raw, func([]byte) (bool, error) { return fieldsV1Converts(v), nil })
	return ok
}

// intOrStringOK: an IntOrString of another type than int or string fails to convert.
func intOrStringOK(v reflect.Value) bool {
	var t intstr.Type
	if v.CanAddr() {
		t = v.Addr().Interface().(*intstr.IntOrString).Type
	} else {
		t = v.Interface().(intstr.IntOrString).Type
	}
	return t == intstr.Int || t == intstr.String
}

var (
	marshalerType = reflect.TypeFor[json.Marshaler]()
	fieldsV1Type  = reflect.TypeFor[metav1.FieldsV1]()
	rawExtType    = reflect.TypeFor[runtime.RawExtension]()
	// stringMarshalers always convert, to a string or null.
	stringMarshalers = map[reflect.Type]bool{reflect.TypeFor[metav1.Time](): true, reflect.TypeFor[metav1.MicroTime](): true,
		reflect.TypeFor[metav1.Duration](): true, reflect.TypeFor[resource.Quantity](): true}
)
