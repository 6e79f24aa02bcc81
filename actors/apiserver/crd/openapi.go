package crd

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// OpenAPIV3 is the OpenAPI v3 document of one served version of a CRD, as kube-apiserver
// publishes it at /openapi/v3/apis/<group>/<version> (paths and the kind's schema, which
// refers to the built-in ObjectMeta definitions): what `kubectl explain widgets.spec.size`
// reads.
func OpenAPIV3(crd *apiextensionsv1.CustomResourceDefinition, version string) (*spec3.OpenAPI, error) {
	return builder.BuildOpenAPIV3(crd, version, builder.Options{})
}

// OpenAPIV2 is the same version's share of /openapi/v2 (value validations and nullable
// stripped, as kube-apiserver does for v2 clients); merge it with builder.MergeSpecs.
func OpenAPIV2(crd *apiextensionsv1.CustomResourceDefinition, version string) (*spec.Swagger, error) {
	return builder.BuildOpenAPIV2(crd, version, builder.Options{V2: true, StripValueValidation: true, StripNullable: true})
}

// TypeConverter returns the structured-merge-diff type converter for server-side apply of the
// CRD's custom resources, as kube-apiserver builds it: every version's schema merged, with
// the definitions they refer to (ObjectMeta: each version's document carries it), plus static
// (more component schemas, may be nil). If the schemas cannot be merged it deduces types
// from the objects (lists replaced whole, maps merged), as kube-apiserver falls back.
func TypeConverter(crd *apiextensionsv1.CustomResourceDefinition, static map[string]*spec.Schema) (managedfields.TypeConverter, error) {
	var specs []*spec3.OpenAPI
	if len(static) > 0 {
		specs = append(specs, &spec3.OpenAPI{Version: "3.0.0", Info: &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes CRD Swagger", Version: "v0.1.0"}},
			Components: &spec3.Components{Schemas: static}})
	}
	for _, v := range crd.Spec.Versions {
		s, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{})
		if err != nil {
			return managedfields.NewDeducedTypeConverter(), nil
		}
		specs = append(specs, s)
	}
	merged, err := builder.MergeSpecsV3(specs...)
	if err != nil {
		return managedfields.NewDeducedTypeConverter(), nil
	}
	return managedfields.NewTypeConverter(merged.Components.Schemas, crd.Spec.PreserveUnknownFields)
}
