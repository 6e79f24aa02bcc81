package crd_test

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/skiff-sh/skiff/actors/apiserver/crd"
)

const gizmos = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo, listKind: GizmoList}
  versions:
  - name: v1beta1
    served: true
    storage: false
    schema: &s
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, description: How many gizmos.}
  - {name: v2, served: true, storage: true, schema: *s}
  - {name: v1, served: true, storage: false, schema: *s}
  - {name: v0, served: false, storage: false, schema: *s}
`

func gizmoCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	c := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal([]byte(gizmos), c); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestKindsForServedVersionsPreferredFirst(t *testing.T) {
	ks, err := crd.KindsFor(gizmoCRD(t))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range ks {
		got = append(got, k.GVK.Version)
		if k.Resource != "gizmos" || k.ListKind != "GizmoList" || !k.Namespaced || k.Custom == nil {
			t.Fatalf("kind %+v", k)
		}
	}
	if len(got) != 3 || got[0] != "v2" || got[1] != "v1" || got[2] != "v1beta1" {
		t.Fatalf("versions %v; want v2 v1 v1beta1 (v0 is not served)", got)
	}
}

func TestOpenAPIV3HasTheKindSchemaAndPaths(t *testing.T) {
	doc, err := crd.OpenAPIV3(gizmoCRD(t), "v1")
	if err != nil {
		t.Fatal(err)
	}
	if doc.Paths == nil || doc.Paths.Paths["/apis/example.com/v1/namespaces/{namespace}/gizmos/{name}"] == nil {
		t.Fatalf("paths: %v", doc.Paths)
	}
	s := doc.Components.Schemas["com.example.v1.Gizmo"]
	if s == nil {
		t.Fatalf("schemas: %v", doc.Components.Schemas)
	}
	if d := s.Properties["spec"].Properties["size"].Description; d != "How many gizmos." {
		t.Fatalf("spec.size description %q", d)
	}
	if v2, err := crd.OpenAPIV2(gizmoCRD(t), "v1"); err != nil || v2.Definitions["com.example.v1.Gizmo"].Properties == nil {
		t.Fatalf("v2: %v", err)
	}
}

func TestTypeConverterTypesCustomObjects(t *testing.T) {
	tc, err := crd.TypeConverter(gizmoCRD(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Gizmo",
		"metadata": map[string]any{"name": "g"}, "spec": map[string]any{"size": int64(2)}}}
	typed, err := tc.ObjectToTyped(u)
	if err != nil {
		t.Fatal(err)
	}
	set, err := typed.ToFieldSet()
	if err != nil || set.Empty() {
		t.Fatalf("field set %v, %v", set, err)
	}
}
