package validation

import (
	"context"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CustomResourceDefinition runs apiextensions-apiserver's own validation of a new CRD: names,
// versions, subresources, printer columns and a structural schema (a non-structural one is
// refused with the reasons kube-apiserver gives).
func CustomResourceDefinition(crd *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	in, err := internalCRD(crd)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), nil, err.Error())}
	}
	return crdvalidation.ValidateCustomResourceDefinition(context.Background(), in)
}

// CustomResourceDefinitionUpdate adds the rules of changing a CRD: immutable group, scope
// changes, stored versions still listed.
func CustomResourceDefinitionUpdate(crd, old *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	in, err := internalCRD(crd)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), nil, err.Error())}
	}
	oldIn, err := internalCRD(old)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	return crdvalidation.ValidateCustomResourceDefinitionUpdate(context.Background(), in, oldIn)
}

func internalCRD(crd *apiextensionsv1.CustomResourceDefinition) (*apiextensions.CustomResourceDefinition, error) {
	out := &apiextensions.CustomResourceDefinition{}
	err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, out, nil)
	return out, err
}
