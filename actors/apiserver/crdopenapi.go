package apiserver

import (
	"log/slog"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/skiff-sh/skiff/actors/apiserver/crd"
)

// publishCRDOpenAPI serves the OpenAPI documents of every served version of the served CRDs,
// merged per group version as kube-apiserver does, and stops serving the group versions no
// CRD serves any more, so `kubectl explain` and client-side validation know custom kinds.
func (s *Server) publishCRDOpenAPI(crds []*apiextensionsv1.CustomResourceDefinition) {
	v2 := map[schema.GroupVersion][]*spec.Swagger{}
	v3 := map[schema.GroupVersion][]*spec3.OpenAPI{}
	for _, c := range crds {
		for _, v := range c.Spec.Versions {
			if !v.Served {
				continue
			}
			gv := schema.GroupVersion{Group: c.Spec.Group, Version: v.Name}
			d2, err2 := crd.OpenAPIV2(c, v.Name)
			d3, err3 := crd.OpenAPIV3(c, v.Name)
			if err2 != nil || err3 != nil {
				slog.Error("CustomResourceDefinition has no OpenAPI documents", "name", c.Name, "version", v.Name, "v2", err2, "v3", err3)
				continue
			}
			v2[gv], v3[gv] = append(v2[gv], d2), append(v3[gv], d3)
		}
	}
	for gv := range s.crdGVs {
		if v3[gv] == nil {
			s.openapi.Delete(gv)
		}
	}
	s.crdGVs = map[schema.GroupVersion]bool{}
	for gv := range v3 {
		m2, err2 := builder.MergeSpecs(&spec.Swagger{}, v2[gv]...)
		m3, err3 := builder.MergeSpecsV3(v3[gv]...)
		if err2 != nil || err3 != nil {
			slog.Error("custom resources' OpenAPI documents do not merge", "groupVersion", gv.String(), "v2", err2, "v3", err3)
			continue
		}
		s.openapi.Set(gv, m2, m3)
		s.crdGVs[gv] = true
	}
}
