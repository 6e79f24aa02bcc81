package apiserver

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/schemas"
)

// withoutRV is obj with no resourceVersion, for encoding, leaving obj (which may be a shared
// decode) untouched: only its top level is copied (schemas.TopLevelCopy).
func withoutRV(obj runtime.Object) runtime.Object {
	if mustMeta(obj).GetResourceVersion() == "" {
		return obj
	}
	out := schemas.TopLevelCopy(obj)
	mustMeta(out).SetResourceVersion("")
	return out
}
