package apiserver

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// Events are created by the thousand, each with its own message, times and object, so their
// encoding keys the create memo once each. Yet their managed fields are alike: against the
// empty live object, a scalar is recorded exactly when it is present and differs from the
// zero value, and which paths exist depends on pointers' and maps' nil-ness, lengths and map
// keys, never on a scalar's value. appendShape keys an object by just that: a bit per scalar
// (zero or not), nil-ness and keys for pointers and maps, and everything else exactly: lists
// (whose items may be keyed by their values) and types that convert themselves (their JSON),
// floats (whose zero has two spellings) by their bits. Two objects of one shape key record
// the same entry. Times convert to null when zero and a string otherwise: a bit suffices.

var (
	unstructuredConverterType          = reflect.TypeFor[value.UnstructuredConverter]()
	unstructuredConverterWithErrorType = reflect.TypeFor[value.UnstructuredConverterWithError]()
	shapeTimes                         = map[reflect.Type]bool{reflect.TypeFor[metav1.Time](): true, reflect.TypeFor[metav1.MicroTime](): true}
)

// shapeKeyed: kinds whose creates are keyed by shape rather than content.
func shapeKeyed(kind string) bool { return kind == "Event" }

var convertingTypes sync.Map // reflect.Type -> bool

// convertsItself: the field manager's conversion asks t itself (its JSON or unstructured
// form). Kept per type: a shape key asks it of every value it walks.
func convertsItself(t reflect.Type) bool {
	if is, ok := convertingTypes.Load(t); ok {
		return is.(bool)
	}
	is := false
	for _, it := range []reflect.Type{marshalerType, unstructuredConverterType, unstructuredConverterWithErrorType} {
		is = is || t.Implements(it) || reflect.PointerTo(t).Implements(it)
	}
	convertingTypes.Store(t, is)
	return is
}

// appendShape appends v's shape (see above), false for a value it cannot key (an interface,
// a map not keyed by strings, a value that fails to encode).
func appendShape(buf []byte, v reflect.Value) ([]byte, bool) {
	t := v.Type()
	if shapeTimes[t] {
		return appendBit(buf, !v.IsZero()), true
	}
	if convertsItself(t) {
		return appendJSON(buf, v)
	}
	switch v.Kind() {
	case reflect.Bool, reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return appendBit(buf, !v.IsZero()), true
	case reflect.Float32, reflect.Float64:
		return binary.LittleEndian.AppendUint64(buf, math.Float64bits(v.Float())), true
	case reflect.Pointer:
		if v.IsNil() {
			return appendBit(buf, false), true
		}
		return appendShape(appendBit(buf, true), v.Elem())
	case reflect.Struct:
		return appendStructShape(buf, v)
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return buf, false
		}
		buf = appendBit(buf, !v.IsNil())
		buf = binary.AppendUvarint(buf, uint64(v.Len()))
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return cmp.Compare(a.String(), b.String()) })
		for _, k := range keys {
			buf = appendString(buf, k.String())
			var ok bool
			if buf, ok = appendShape(buf, v.MapIndex(k)); !ok {
				return buf, false
			}
		}
		return buf, true
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 { // one base64 string: null, "" or other
			return appendBit(appendBit(buf, !v.IsNil()), v.Len() > 0), true
		}
		return appendJSON(appendBit(buf, !v.IsNil()), v)
	case reflect.Array:
		return appendJSON(buf, v)
	}
	return buf, false
}

// appendStructShape appends the shapes of the fields the conversion reads (exported, named).
func appendStructShape(buf []byte, v reflect.Value) ([]byte, bool) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if name, opts, _ := strings.Cut(f.Tag.Get("json"), ","); !f.IsExported() || (name == "-" && opts == "") {
			continue
		}
		var ok bool
		if buf, ok = appendShape(buf, v.Field(i)); !ok {
			return buf, false
		}
	}
	return buf, true
}

func appendJSON(buf []byte, v reflect.Value) ([]byte, bool) {
	data, err := json.Marshal(v.Interface())
	if err != nil {
		return buf, false
	}
	return appendString(buf, string(data)), true
}

func appendString(buf []byte, s string) []byte {
	return append(binary.AppendUvarint(buf, uint64(len(s))), s...)
}

func appendBit(buf []byte, set bool) []byte {
	if set {
		return append(buf, 1)
	}
	return append(buf, 0)
}
