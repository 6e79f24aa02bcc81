package apiserver

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/schemas"
)

// The Warning kube-apiserver sends with every request of a deprecated kind, worded as its
// deprecation package words it. Whether a kind is deprecated comes from k8s.io/api's generated
// lifecycle methods; v1 Endpoints is deprecated by Kubernetes' registry instead, so it is named here.

type lifecycleDeprecated interface{ APILifecycleDeprecated() (major, minor int) }
type lifecycleRemoved interface{ APILifecycleRemoved() (major, minor int) }
type lifecycleReplacement interface {
	APILifecycleReplacement() schema.GroupVersionKind
}

var registryDeprecated = map[schema.GroupVersionKind]string{
	corev1.SchemeGroupVersion.WithKind("Endpoints"): "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice",
}

var deprecations sync.Map // *schemas.Kind -> string ("" = not deprecated)

func deprecationWarning(k *schemas.Kind) string {
	if msg, ok := deprecations.Load(k); ok {
		return msg.(string)
	}
	msg := lifecycleWarning(k)
	deprecations.Store(k, msg)
	return msg
}

// servedMinor is the Kubernetes minor version Skiff speaks: a kind deprecated after it is not yet.
var servedMinor, _ = strconv.Atoi(strings.Split(KubernetesVersion, ".")[1])

func lifecycleWarning(k *schemas.Kind) string {
	if msg, ok := registryDeprecated[k.GVK]; ok {
		return msg
	}
	if k.New == nil {
		return ""
	}
	obj := k.New()
	d, ok := obj.(lifecycleDeprecated)
	if !ok {
		return ""
	}
	major, minor := d.APILifecycleDeprecated()
	if (major == 0 && minor == 0) || major > 1 || (major == 1 && minor > servedMinor) {
		return ""
	}
	msg := fmt.Sprintf("%s %s is deprecated in v%d.%d+", k.GVK.GroupVersion(), k.GVK.Kind, major, minor)
	if r, ok := obj.(lifecycleRemoved); ok {
		if rmaj, rmin := r.APILifecycleRemoved(); rmaj != 0 || rmin != 0 {
			msg += fmt.Sprintf(", unavailable in v%d.%d+", rmaj, rmin)
		}
	}
	if r, ok := obj.(lifecycleReplacement); ok {
		if gvk := r.APILifecycleReplacement(); !gvk.Empty() {
			msg += fmt.Sprintf("; use %s %s", gvk.GroupVersion(), gvk.Kind)
		}
	}
	return msg
}
