package apiserver

import (
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// Whether structured-merge-diff's validation walk passes for every value of a Go type, as
// unvalidatedTypes needs to know (typedconvert.go): the type is walked alongside its schema
// type as the walk would walk a value, once per type.

type conformKey struct {
	t    reflect.Type
	name string
}

// conformance checks Go types against schema types as the validation walk would see their
// values, memoising named types (a type being checked counts as conforming, so recursive
// types end; a failure anywhere fails the root, whose memo is dropped).
type conformance struct {
	s    *smdschema.Schema
	done map[conformKey]*valueCheck
}

// check reports whether every value of t validates as tr but for what the returned check
// looks at per value.
func (c *conformance) check(t reflect.Type, tr smdschema.TypeRef) (*valueCheck, bool) {
	if tr.NamedType == nil {
		return c.checkAtom(t, tr)
	}
	key := conformKey{t, *tr.NamedType}
	if r, ok := c.done[key]; ok {
		return r, true
	}
	holder := &valueCheck{}
	c.done[key] = holder
	r, ok := c.checkAtom(t, tr)
	if !ok {
		return nil, false
	}
	if r == nil {
		c.done[key] = nil
		return nil, true
	}
	holder.f = r.f
	return holder, true
}

func (c *conformance) checkAtom(t reflect.Type, tr smdschema.TypeRef) (*valueCheck, bool) {
	a, ok := c.s.Resolve(tr)
	if !ok {
		return nil, false
	}
	if t.Kind() == reflect.Pointer { // nil is null, which any schema type takes
		inner, ok := c.check(t.Elem(), tr)
		if inner == nil || !ok {
			return nil, ok
		}
		return &valueCheck{f: func(v reflect.Value) bool { return v.IsNil() || inner.ok(v.Elem()) }}, true
	}
	if t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) {
		return c.marshaled(t, a)
	}
	switch t.Kind() {
	case reflect.Struct:
		return c.structFields(t, a)
	case reflect.Map:
		if t.Key().Kind() != reflect.String || a.Map == nil || len(a.Map.Fields) > 0 || a.Map.ElementType == (smdschema.TypeRef{}) {
			return nil, false
		}
		inner, ok := c.check(t.Elem(), a.Map.ElementType)
		if inner == nil || !ok {
			return nil, ok
		}
		return &valueCheck{f: func(v reflect.Value) bool {
			for it := v.MapRange(); it.Next(); {
				if !inner.ok(it.Value()) {
					return false
				}
			}
			return true
		}}, true
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 { // base64 string
			return nil, scalarTakes(a, smdschema.String)
		}
		return c.list(t, a)
	case reflect.String:
		return nil, scalarTakes(a, smdschema.String)
	case reflect.Bool:
		return nil, scalarTakes(a, smdschema.Boolean)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8,
		reflect.Uint16, reflect.Uint32, reflect.Float32, reflect.Float64:
		return nil, scalarTakes(a, smdschema.Numeric)
	}
	return nil, false // interfaces, uint64, arrays: not in the types, not worked out
}

func scalarTakes(a smdschema.Atom, s smdschema.Scalar) bool {
	return a.Scalar != nil && (*a.Scalar == s || *a.Scalar == smdschema.Untyped)
}

// marshaled checks the types converted through their JSON: only those whose conversions are
// known qualify, with a check per value of those that may fail or vary in shape.
func (c *conformance) marshaled(t reflect.Type, a smdschema.Atom) (*valueCheck, bool) {
	switch {
	case stringMarshalers[t]:
		return nil, scalarTakes(a, smdschema.String)
	case t == reflect.TypeFor[intstr.IntOrString]():
		return &valueCheck{f: intOrStringOK}, a.Scalar != nil && *a.Scalar == smdschema.Untyped
	case t == rawExtType: // any JSON at all
		return &valueCheck{f: converts(t, anyShape)}, c.takesAny(a, map[string]bool{})
	case t == fieldsV1Type:
		ok := a.Map != nil && len(a.Map.Fields) == 0 && c.takesAnyRef(a.Map.ElementType, map[string]bool{})
		return &valueCheck{f: fieldsV1OK}, ok
	}
	return nil, false
}

// takesAny: the schema type validates any JSON value (structured-merge-diff's untyped types).
func (c *conformance) takesAny(a smdschema.Atom, seen map[string]bool) bool {
	return a.Scalar != nil && *a.Scalar == smdschema.Untyped &&
		a.List != nil && a.List.ElementRelationship != smdschema.Associative && c.takesAnyRef(a.List.ElementType, seen) &&
		a.Map != nil && len(a.Map.Fields) == 0 && c.takesAnyRef(a.Map.ElementType, seen)
}

func (c *conformance) takesAnyRef(tr smdschema.TypeRef, seen map[string]bool) bool {
	if tr.NamedType != nil {
		if seen[*tr.NamedType] {
			return true
		}
		seen[*tr.NamedType] = true
	}
	a, ok := c.s.Resolve(tr)
	return ok && c.takesAny(a, seen)
}

// structFields checks each JSON field of a struct against the schema's field of that name.
func (c *conformance) structFields(t reflect.Type, a smdschema.Atom) (*valueCheck, bool) {
	if a.Map == nil {
		return nil, false
	}
	fields, ok := jsonFields(t)
	if !ok {
		return nil, false
	}
	type sub struct {
		index []int
		raw   *valueCheck
	}
	var subs []sub
	for _, f := range fields {
		tr := a.Map.ElementType
		if sf, ok := a.Map.FindField(f.name); ok {
			tr = sf.Type
		} else if tr == (smdschema.TypeRef{}) {
			return nil, false // "field not declared in schema"
		}
		raw, ok := c.check(f.typ, tr)
		if !ok {
			return nil, false
		}
		if raw != nil {
			subs = append(subs, sub{f.index, raw})
		}
	}
	if len(subs) == 0 {
		return nil, true
	}
	return &valueCheck{f: func(v reflect.Value) bool {
		for _, s := range subs {
			if !s.raw.ok(v.FieldByIndex(s.index)) {
				return false
			}
		}
		return true
	}}, true
}

// list checks a list's elements, and that an associative list's items always name their
// item: a set's are scalars, a list-map's carry a key field whatever their value (a key
// field the Go type never omits, or one the schema defaults).
func (c *conformance) list(t reflect.Type, a smdschema.Atom) (*valueCheck, bool) {
	if a.List == nil {
		return nil, false
	}
	et := t.Elem()
	if a.List.ElementRelationship == smdschema.Associative {
		if len(a.List.Keys) == 0 && !isPlainScalar(et) {
			return nil, false
		}
		if len(a.List.Keys) > 0 && !c.alwaysKeyed(et, a.List) {
			return nil, false
		}
	}
	inner, ok := c.check(et, a.List.ElementType)
	if inner == nil || !ok {
		return nil, ok
	}
	return &valueCheck{f: func(v reflect.Value) bool {
		for i := range v.Len() {
			if !inner.ok(v.Index(i)) {
				return false
			}
		}
		return true
	}}, true
}

func isPlainScalar(t reflect.Type) bool {
	if t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) {
		return false
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

func (c *conformance) alwaysKeyed(et reflect.Type, l *smdschema.List) bool {
	if et.Kind() != reflect.Struct || et.Implements(marshalerType) || reflect.PointerTo(et).Implements(marshalerType) {
		return false // a nil pointer item is an error; marshalled items are not worked out
	}
	item, ok := c.s.Resolve(l.ElementType)
	if !ok || item.Map == nil {
		return false
	}
	fields, ok := jsonFields(et)
	if !ok {
		return false
	}
	for _, k := range l.Keys {
		if sf, ok := item.Map.FindField(k); ok && sf.Default != nil {
			return true
		}
		for _, f := range fields {
			if f.name == k && !f.omittable {
				return true
			}
		}
	}
	return false
}

type jsonField struct {
	name      string
	index     []int
	typ       reflect.Type
	omittable bool // omitempty or omitzero
}

// jsonFields are a struct's fields as structured-merge-diff's reflection names them (its
// json tag rules, inline structs flattened), and false for what it is not worked out for
// here: pointers inlined, names given twice, or another list of names than the library's.
func jsonFields(t reflect.Type) ([]jsonField, bool) {
	var out []jsonField
	if !appendJSONFields(t, nil, &out) {
		return nil, false
	}
	lib := value.TypeReflectEntryOf(t).Fields()
	if len(lib) != len(out) {
		return nil, false
	}
	for _, f := range out {
		if _, ok := lib[f.name]; !ok {
			return nil, false
		}
	}
	return out, true
}

func appendJSONFields(t reflect.Type, index []int, out *[]jsonField) bool {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if (f.PkgPath != "" && !f.Anonymous) || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		idx := append(slices.Clone(index), i)
		if f.Anonymous && name == "" {
			if f.Type.Kind() == reflect.Pointer {
				return false
			}
			if f.Type.Kind() == reflect.Struct && !appendJSONFields(f.Type, idx, out) {
				return false
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		o := strings.Split(opts, ",")
		*out = append(*out, jsonField{name: name, index: idx, typ: f.Type, omittable: slices.Contains(o, "omitempty") || slices.Contains(o, "omitzero")})
	}
	return true
}
