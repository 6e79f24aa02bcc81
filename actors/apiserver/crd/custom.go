package crd

import (
	"context"
	"strings"
	"time"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	structuralobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/skiff-sh/skiff/schemas"
)

// custom is one served version of a CRD: schemas.Custom over apiextensions-apiserver's
// structural schema algorithms, in the order its handler and strategy run them.
type custom struct {
	gvk        schema.GroupVersionKind
	namespaced bool
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        *cel.Validator // nil when the schema has no x-kubernetes-validations
	table      rest.TableConvertor
	scale      *schemas.ScalePaths
	// terminating: the CRD is being deleted (kube-apiserver then refuses creates).
	terminating bool
	fields      *fieldManagers
	selectable  []string // selectableFields' paths, without the leading dot
}

func (c *custom) SelectableFields() []string { return c.selectable }

var _ schemas.Custom = (*custom)(nil)

// Prune drops unknown fields (apart from x-kubernetes-preserve-unknown-fields subtrees and the
// metadata of embedded resources, which is coerced to ObjectMeta's fields).
func (c *custom) Prune(u *unstructured.Unstructured) []string {
	opts := structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}
	pruned := structuralpruning.PruneWithOptions(u.Object, c.structural, true, opts)
	_, unknown := structuralobjectmeta.CoerceWithOptions(nil, u.Object, c.structural, true,
		structuralobjectmeta.CoerceOptions{DropInvalidFields: true, ReturnUnknownFieldPaths: true})
	return append(pruned, unknown...)
}

// Default applies the schema's defaults, then prunes what they may have added outside it.
func (c *custom) Default(u *unstructured.Unstructured) {
	structuraldefaulting.Default(u.Object, c.structural)
	structuralpruning.Prune(u.Object, c.structural, true)
}

func (c *custom) Validate(u *unstructured.Unstructured) field.ErrorList {
	return c.validate(u, nil)
}

func (c *custom) ValidateUpdate(u, old *unstructured.Unstructured) field.ErrorList {
	errs := c.validate(u, old)
	return append(errs, metavalidation.ValidateObjectMetaAccessorUpdate(u, old, field.NewPath("metadata"))...)
}

func (c *custom) validate(u, old *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	if u.GetAPIVersion() != c.gvk.GroupVersion().String() {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), u.GetAPIVersion(), "must be "+c.gvk.GroupVersion().String()))
	}
	if u.GetKind() != c.gvk.Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), u.GetKind(), "must be "+c.gvk.Kind))
	}
	errs = append(errs, metavalidation.ValidateObjectMetaAccessor(u, c.namespaced, metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	ctx := context.Background()
	if old == nil {
		errs = append(errs, apiservervalidation.ValidateCustomResource(nil, u.Object, c.validator)...)
	} else {
		errs = append(errs, apiservervalidation.ValidateCustomResourceUpdate(nil, u.Object, old.Object, c.validator)...)
	}
	errs = append(errs, structuralobjectmeta.Validate(ctx, nil, u.Object, c.structural, true)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, c.structural, u.Object)...)
	if c.cel != nil {
		var oldObj any
		if old != nil {
			oldObj = old.Object
		}
		celErrs, _ := c.cel.Validate(ctx, nil, c.structural, u.Object, oldObj, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	return append(errs, c.validateScale(u)...)
}

// validateScale checks the replica counts the scale subresource reads, as kube-apiserver does.
func (c *custom) validateScale(u *unstructured.Unstructured) field.ErrorList {
	if c.scale == nil {
		return nil
	}
	var errs field.ErrorList
	for _, p := range []string{c.scale.SpecReplicas, c.scale.StatusReplicas} {
		n, found, err := unstructured.NestedInt64(u.Object, splitPath(p)...)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(field.NewPath(p), nil, err.Error()))
		case found && n < 0:
			errs = append(errs, field.Invalid(field.NewPath(p), n, "should be a non-negative integer"))
		case found && n > 1<<31-1:
			errs = append(errs, field.Invalid(field.NewPath(p), n, "should be less than or equal to 2147483647"))
		}
	}
	return errs
}

// splitPath turns ".spec.replicas" into [spec replicas].
func splitPath(p string) []string { return strings.Split(strings.TrimPrefix(p, "."), ".") }

func (c *custom) Scale() *schemas.ScalePaths { return c.scale }

func (c *custom) Terminating() bool { return c.terminating }

// Table renders the version's additionalPrinterColumns (Name first), with apiextensions'
// own table convertor.
func (c *custom) Table(objs []runtime.Object, _ time.Time) *metav1.Table {
	list := &unstructured.UnstructuredList{}
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			list.Items = append(list.Items, *u)
		}
	}
	t, err := c.table.ConvertToTable(context.Background(), list, nil)
	if err != nil {
		return &metav1.Table{}
	}
	t.APIVersion, t.Kind = "meta.k8s.io/v1", "Table"
	return t
}
