package schemas

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// Custom is what a kind served from a CustomResourceDefinition brings along: its objects are
// unstructured, and their pruning, defaulting, validation and table come from the CRD's schema
// (package actors/apiserver/crd), not from this package's typed code.
type Custom interface {
	// Prune drops the fields the schema does not declare and returns their paths.
	Prune(obj *unstructured.Unstructured) []string
	Default(obj *unstructured.Unstructured)
	Validate(obj *unstructured.Unstructured) field.ErrorList
	ValidateUpdate(obj, old *unstructured.Unstructured) field.ErrorList
	// Table is kubectl's table with the CRD's additionalPrinterColumns.
	Table(objs []runtime.Object, now time.Time) *metav1.Table
	// Scale names the fields the scale subresource reads and writes (nil: none).
	Scale() *ScalePaths
	// Terminating reports that the CRD is being deleted: no new objects are taken.
	Terminating() bool
	// FieldManager is server-side apply's field manager for the resource (sub "") or a
	// subresource, by the CRD's schema; reset names the fields that endpoint cannot change.
	FieldManager(sub string, reset map[fieldpath.APIVersion]fieldpath.Filter) (*managedfields.FieldManager, error)
	// SelectableFields are the version's selectableFields, as dotted paths ("spec.color").
	SelectableFields() []string
}

// ScalePaths are the JSON paths (".spec.replicas") of a custom kind's scale subresource.
type ScalePaths struct {
	SpecReplicas, StatusReplicas, LabelSelector string
}

// customKinds holds the kinds the served CustomResourceDefinitions define, swapped whole;
// customSources is what each source (a CRD registry following one log) last published.
var (
	customKinds   atomic.Pointer[[]*Kind]
	customMu      sync.Mutex
	customSources = map[any][]*Kind{}
)

// SetCustomKinds replaces the custom kinds published by source (nil kinds: withdraws them);
// every lookup sees the union of all sources. Each kind must have Custom set and New
// returning *unstructured.Unstructured; the caller must not modify them afterwards.
func SetCustomKinds(source any, ks []*Kind) {
	for _, k := range ks {
		if k.ListKind == "" {
			k.ListKind = k.GVK.Kind + "List"
		}
	}
	customMu.Lock()
	defer customMu.Unlock()
	if len(ks) == 0 {
		delete(customSources, source)
	} else {
		customSources[source] = slices.Clone(ks)
	}
	var all []*Kind
	seen := map[schema.GroupVersionKind]bool{}
	for _, src := range customSources {
		for _, k := range src {
			if !seen[k.GVK] {
				seen[k.GVK] = true
				all = append(all, k)
			}
		}
	}
	customKinds.Store(&all)
}

// CustomKinds returns the kinds defined by CustomResourceDefinitions right now.
func CustomKinds() []*Kind {
	if p := customKinds.Load(); p != nil {
		return *p
	}
	return nil
}

// allKinds is the built-in table followed by the custom kinds; lookups prefer built-ins.
func allKinds() []*Kind {
	c := CustomKinds()
	if len(c) == 0 {
		return kinds
	}
	return append(slices.Clip(kinds), c...)
}

// customOf finds the custom kind of an unstructured object, if it is one.
func customOf(obj runtime.Object) (*unstructured.Unstructured, Custom) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	k, ok := ByGVK(u.GroupVersionKind())
	if !ok || k.Custom == nil {
		return u, nil
	}
	return u, k.Custom
}

// AddSelectableFields adds a custom object's selectableFields to set as field selectors see
// them (kube's rule: an absent field is "", integers and booleans in their decimal and
// true/false forms); other objects leave set as it is.
func AddSelectableFields(obj runtime.Object, set map[string]string) {
	u, c := customOf(obj)
	if c == nil {
		return
	}
	for _, path := range c.SelectableFields() {
		v, _, _ := unstructured.NestedFieldNoCopy(u.Object, strings.Split(path, ".")...)
		switch v := v.(type) {
		case nil:
			set[path] = ""
		case string:
			set[path] = v
		default:
			set[path] = fmt.Sprint(v)
		}
	}
}

// decodeCustom reads a custom object and prunes what its schema does not declare, as
// kube-apiserver's decoder does; with strict set, duplicate and pruned fields are errors.
func decodeCustom(k *Kind, raw []byte, strict bool) (runtime.Object, []FieldError, error) {
	var m map[string]any
	if strict {
		fe, err := strictUnmarshal(raw, &m)
		if err != nil || len(fe) > 0 {
			return nil, fe, err
		}
	} else if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &m); err != nil {
		return nil, nil, err
	}
	if m == nil {
		return nil, nil, errors.New("the body must be a JSON object")
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(k.GVK)
	pruned := k.Custom.Prune(u)
	if strict && len(pruned) > 0 {
		fe := make([]FieldError, 0, len(pruned))
		for _, p := range pruned {
			fe = append(fe, FieldError{Path: p, Detail: "field not declared in schema"})
		}
		return nil, fe, nil
	}
	return u, nil, nil
}
