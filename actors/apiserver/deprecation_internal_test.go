package apiserver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/schemas"
)

func TestDeprecationWarnings(t *testing.T) {
	for _, c := range []struct {
		kind *schemas.Kind
		want string
	}{
		{&schemas.Kind{GVK: corev1.SchemeGroupVersion.WithKind("ComponentStatus"), New: func() runtime.Object { return &corev1.ComponentStatus{} }},
			"v1 ComponentStatus is deprecated in v1.19+"},
		{&schemas.Kind{GVK: corev1.SchemeGroupVersion.WithKind("Endpoints"), New: func() runtime.Object { return &corev1.Endpoints{} }},
			"v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"},
	} {
		if got := deprecationWarning(c.kind); got != c.want {
			t.Errorf("%s: %q, want %q", c.kind.GVK, got, c.want)
		}
	}
	if servedMinor != 37 {
		t.Errorf("servedMinor = %d, want 37 (from %s)", servedMinor, KubernetesVersion)
	}
	// Every kind Skiff serves is GA: none warns.
	for _, k := range schemas.Kinds() {
		if got := deprecationWarning(k); got != "" && k.GVK.Kind != "Endpoints" {
			t.Errorf("%s warns %q", k.GVK, got)
		}
	}
}
