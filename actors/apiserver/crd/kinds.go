// Package crd serves CustomResourceDefinitions (apiextensions.k8s.io/v1) the way
// kube-apiserver's apiextensions-apiserver does, with its own packages: each served version of
// an established CRD becomes a schemas.Kind whose objects are unstructured JSON in the one log,
// pruned, defaulted and validated against the version's structural schema (and its CEL rules).
// The Registry follows the CRDs in the log and swaps the set of custom kinds every lookup sees.
package crd

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	"github.com/skiff-sh/skiff/schemas"
)

// KindsFor builds the kinds of a CRD's served versions, the preferred version first (Kubernetes'
// version priority: v2 > v1 > v1beta2 > v1alpha1), so an unqualified name resolves to it.
func KindsFor(crd *apiextensionsv1.CustomResourceDefinition) ([]*schemas.Kind, error) {
	var out []*schemas.Kind
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		k, err := kindFor(crd, v)
		if err != nil {
			return nil, fmt.Errorf("%s version %s: %w", crd.Name, v.Name, err)
		}
		out = append(out, k)
	}
	sort.SliceStable(out, func(i, j int) bool {
		return version.CompareKubeAwareVersionStrings(out[i].GVK.Version, out[j].GVK.Version) > 0
	})
	return out, nil
}

func kindFor(crd *apiextensionsv1.CustomResourceDefinition, v apiextensionsv1.CustomResourceDefinitionVersion) (*schemas.Kind, error) {
	names := crd.Spec.Names
	gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: names.Kind}
	c, err := newCustom(crd, v)
	if err != nil {
		return nil, err
	}
	k := &schemas.Kind{
		GVK: gvk, Resource: names.Plural, Singular: names.Singular, ShortNames: names.ShortNames,
		Namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped, ListKind: names.ListKind,
		Categories: names.Categories,
		New: func() runtime.Object {
			u := &unstructured.Unstructured{Object: map[string]any{}}
			u.SetGroupVersionKind(gvk)
			return u
		},
		NewList: func() runtime.Object { return &unstructured.UnstructuredList{} },
		Custom:  c,
	}
	if k.Singular == "" {
		k.Singular = lower(names.Kind)
	}
	if v.Subresources != nil {
		if v.Subresources.Status != nil {
			k.Subresources = append(k.Subresources, "status")
		}
		if v.Subresources.Scale != nil {
			k.Subresources = append(k.Subresources, "scale")
		}
	}
	return k, nil
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// newCustom prepares what serving one version needs: its structural schema, the OpenAPI
// validator of the whole object, the CEL validator and the table of its printer columns.
func newCustom(crd *apiextensionsv1.CustomResourceDefinition, v apiextensionsv1.CustomResourceDefinitionVersion) (*custom, error) {
	val, err := apihelpers.GetSchemaForVersion(crd, v.Name)
	if err != nil {
		return nil, err
	}
	in := &apiextensions.CustomResourceValidation{}
	if val != nil {
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, in, nil); err != nil {
			return nil, err
		}
	}
	if in.OpenAPIV3Schema == nil {
		in.OpenAPIV3Schema = &apiextensions.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTrue()}
	}
	s, err := structuralschema.NewStructural(in.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("schema is not structural: %w", err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(in.OpenAPIV3Schema)
	if err != nil {
		return nil, err
	}
	columns := v.AdditionalPrinterColumns
	if len(columns) == 0 { // as kube-apiserver serves a CRD without columns
		columns = []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"}}
	}
	table, err := tableconvertor.New(columns)
	if err != nil {
		return nil, err
	}
	c := &custom{
		gvk:        schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind},
		structural: s, validator: validator, table: table,
		namespaced:  crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		terminating: crd.DeletionTimestamp != nil,
		cel:         cel.NewValidator(s, true, celconfig.PerCallLimit),
		fields:      &fieldManagers{crd: crd},
	}
	for _, f := range v.SelectableFields {
		c.selectable = append(c.selectable, strings.TrimPrefix(f.JSONPath, "."))
	}
	if v.Subresources != nil && v.Subresources.Scale != nil {
		sc := v.Subresources.Scale
		c.scale = &schemas.ScalePaths{SpecReplicas: sc.SpecReplicasPath, StatusReplicas: sc.StatusReplicasPath}
		if sc.LabelSelectorPath != nil {
			c.scale.LabelSelector = *sc.LabelSelectorPath
		}
	}
	return c, nil
}

func ptrTrue() *bool { t := true; return &t }
