package openapi

import (
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/skiff-sh/skiff/schemas"
	defs "github.com/skiff-sh/skiff/schemas/openapi"
)

// TypeSchemas are the OpenAPI v3 definitions of the named models and all they refer to, tagged
// with the kinds they are served as: the input of server-side apply's type converter, as
// kube-apiserver builds its own from the same generated definitions.
func TypeSchemas(models ...string) (map[string]*spec.Schema, error) {
	n := newNamer(schemas.Scheme)
	return builder3.BuildOpenAPIDefinitionsForResources(&common.OpenAPIV3Config{
		GetDefinitions: defs.GetOpenAPIDefinitions, GetDefinitionName: n.name,
	}, models...)
}
