package apiserver

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/applyconfigurations"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/skiff-sh/skiff/actors/apiserver/openapi"
	"github.com/skiff-sh/skiff/schemas"
)

// internalManager names the apiserver's own writes (default namespaces, bootstrap RBAC), which
// come with neither a fieldManager nor a User-Agent.
const internalManager = "skiff-apiserver"

// builtinTypes is the structured-merge-diff schema of every k8s.io/api kind: client-go's
// embedded OpenAPI models, parsed once, converting typed objects without the validation
// they cannot fail (typedconvert.go).
var builtinTypes = sync.OnceValue(func() managedfields.TypeConverter {
	tc := applyconfigurations.NewTypeConverter(schemas.Scheme)
	u, err := newUnvalidatedTypes(tc, schemas.Scheme)
	if err != nil {
		return tc // the library's own conversion, validating all
	}
	return u
})

// generatedTypes covers the kinds client-go's models do not (they hold k8s.io/api only): the
// apiextensions kinds, from the definitions openapi-gen generated for the served documents.
var generatedTypes = sync.OnceValues(func() (managedfields.TypeConverter, error) {
	var models []string
	for _, k := range schemas.Kinds() {
		if m, ok := k.New().(interface{ OpenAPIModelName() string }); ok && !strings.HasPrefix(reflect.TypeOf(k.New()).Elem().PkgPath(), "k8s.io/api/") {
			models = append(models, m.OpenAPIModelName())
		}
	}
	defs, err := openapi.TypeSchemas(models...)
	if err != nil {
		return nil, err
	}
	return managedfields.NewTypeConverter(defs, false)
})

// typeConverterFor is the schema the field manager of a kind merges with: list merge keys
// (containerPort+protocol, port+protocol), atomic and granular maps, as the kind's OpenAPI
// says. Kinds with another source of schema (custom resources) answer here.
func typeConverterFor(gvk schema.GroupVersionKind) (managedfields.TypeConverter, error) {
	if !schemas.Scheme.Recognizes(gvk) {
		return nil, fmt.Errorf("no schema for %s to track managed fields with", gvk)
	}
	if obj, err := schemas.Scheme.New(gvk); err == nil && !strings.HasPrefix(reflect.TypeOf(obj).Elem().PkgPath(), "k8s.io/api/") {
		return generatedTypes()
	}
	return builtinTypes(), nil
}

// fieldManagerKey names one field manager: per kind and subresource, as kube-apiserver keeps
// one per request scope.
type fieldManagerKey struct {
	gvk schema.GroupVersionKind
	sub string
}

var fieldManagers sync.Map // fieldManagerKey -> *managedfields.FieldManager

// fieldManagerFor is kube-apiserver's field manager for a kind's resource or subresource, with
// the version served as its hub; entries of another version of the kind (autoscaling/v1 and v2
// HPAs) are converted through the scheme's conversions.
func fieldManagerFor(k *schemas.Kind, sub string) (*managedfields.FieldManager, error) {
	if k.Custom != nil {
		return k.Custom.FieldManager(sub, resetFields(k, sub))
	}
	key := fieldManagerKey{k.GVK, sub}
	if fm, ok := fieldManagers.Load(key); ok {
		return fm.(*managedfields.FieldManager), nil
	}
	tc, err := typeConverterFor(k.GVK)
	if err != nil {
		return nil, err
	}
	fm, err := newFieldManager(tc, k, sub)
	if err != nil {
		return nil, err
	}
	actual, _ := fieldManagers.LoadOrStore(key, fm)
	return actual.(*managedfields.FieldManager), nil
}

// newFieldManager is a built-in kind's field manager for an endpoint over the schema tc.
func newFieldManager(tc managedfields.TypeConverter, k *schemas.Kind, sub string) (*managedfields.FieldManager, error) {
	return managedfields.NewDefaultFieldManager(tc, inVersion{schemas.Scheme}, defaulter{}, schemas.Scheme,
		k.GVK, k.GVK.GroupVersion(), sub, resetFields(k, sub))
}

// resetFields are the fields a write through this endpoint cannot change, so no manager of
// the endpoint owns them: status from the resource, spec from /status.
func resetFields(k *schemas.Kind, sub string) map[fieldpath.APIVersion]fieldpath.Filter {
	var reset *fieldpath.Set
	switch {
	case sub == "status":
		reset = fieldpath.NewSet(fieldpath.MakePathOrDie("spec"))
	case sub == "" && k.HasSubresource("status"):
		reset = fieldpath.NewSet(fieldpath.MakePathOrDie("status"))
	default:
		return nil
	}
	return map[fieldpath.APIVersion]fieldpath.Filter{
		fieldpath.APIVersion(k.GVK.GroupVersion().String()): fieldpath.NewExcludeSetFilter(reset),
	}
}

// inVersion is the scheme's conversion for the field manager, but a typed object already of
// the target version is handed back as it is, where the scheme deep-copies it: the field
// manager only reads the versioned forms of the live and new objects (two copies of a Pod per
// tracked write), and what it builds itself (an apply's result) is unstructured, so converted.
type inVersion struct{ *runtime.Scheme }

func (c inVersion) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	gv, isGV := target.(schema.GroupVersion) // what the field manager asks for
	if _, u := in.(runtime.Unstructured); isGV && !u {
		gvk := in.GetObjectKind().GroupVersionKind()
		if t := reflect.TypeOf(in); gvk.GroupVersion() == gv && t.Kind() == reflect.Pointer && c.AllKnownTypes()[gvk] == t.Elem() {
			return in, nil
		}
	}
	return c.Scheme.ConvertToVersion(in, target)
}

// defaulter is the scheme defaulting the field manager runs on an applied object, as the
// request decoder does for other writes.
type defaulter struct{}

func (defaulter) Default(obj runtime.Object) { schemas.Default(obj) }

// trackUpdate records a non-apply write's changes in next's managedFields as the request's
// manager's Update, as kube-apiserver does on every create, update and patch. A failure keeps
// the live object's entries, never the write.
func trackUpdate(k *schemas.Kind, sub string, live, next runtime.Object, wo writeOptions) runtime.Object {
	if wo.applied {
		return next // apply computed the managed fields itself
	}
	if wo.trackAs != "" {
		sub = wo.trackAs
	}
	manager := managerOf(wo)
	if fields, ok := ownedUpdate(k, sub, live, next, manager); ok {
		mustMeta(next).SetManagedFields(fields)
		return next
	}
	fm, err := fieldManagerFor(k, sub)
	if err != nil {
		mustMeta(next).SetManagedFields(mustMeta(live).GetManagedFields())
		return next
	}
	return trackFull(fm, k, sub, live, next, manager)
}

// managerOf is the request's field manager: its fieldManager parameter, else its User-Agent up
// to the first "/" (kube-apiserver's rule), else the apiserver itself.
func managerOf(wo writeOptions) string {
	if wo.fieldManager != "" {
		return wo.fieldManager
	}
	m := strings.Split(wo.userAgent, "/")[0]
	var buf bytes.Buffer
	for _, r := range m {
		if !unicode.IsPrint(r) {
			continue
		}
		if buf.Len()+utf8.RuneLen(r) > metav1validation.FieldManagerMaxLength {
			break
		}
		buf.WriteRune(r)
	}
	if buf.Len() == 0 {
		return internalManager
	}
	return buf.String()
}

// checkPatchOptions validates fieldManager and force as kube-apiserver's PatchOptions: apply
// requires a manager, force is for apply only.
func checkPatchOptions(pt types.PatchType, wo writeOptions) error {
	force, err := parseForce(wo.force)
	if err != nil {
		return err
	}
	o := &metav1.PatchOptions{FieldManager: wo.fieldManager, Force: force}
	if wo.dryRun {
		o.DryRun = []string{metav1.DryRunAll}
	}
	return optionsError("PatchOptions", metav1validation.ValidatePatchOptions(o, pt))
}

// checkFieldManager validates the fieldManager of a create or update.
func checkFieldManager(kind string, wo writeOptions) error {
	return optionsError(kind, metav1validation.ValidateFieldManager(wo.fieldManager, field.NewPath("fieldManager")))
}

func optionsError(kind string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: kind}, "", errs)
}

// parseForce reads the force parameter of an apply.
func parseForce(v string) (*bool, error) {
	if v == "" {
		return nil, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return nil, badRequest("force %q is not a boolean", v)
	}
	return &b, nil
}
