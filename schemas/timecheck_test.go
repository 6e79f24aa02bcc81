package schemas_test

import (
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
)

var timeType = reflect.TypeOf(time.Time{})

// hasSubSecondTime reports whether any time in obj has a fraction of a second, which JSON
// encoding of metav1.Time drops (and metav1.MicroTime rounds to microseconds).
func hasSubSecondTime(obj runtime.Object) bool {
	return walkTimes(reflect.ValueOf(obj))
}

func walkTimes(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return !v.IsNil() && walkTimes(v.Elem())
	case reflect.Struct:
		if v.Type() == timeType {
			return v.Interface().(time.Time).Nanosecond() != 0
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() && walkTimes(v.Field(i)) {
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if walkTimes(v.Index(i)) {
				return true
			}
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			if walkTimes(v.MapIndex(k)) {
				return true
			}
		}
	}
	return false
}
