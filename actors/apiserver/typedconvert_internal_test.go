package apiserver

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"sigs.k8s.io/randfill"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/schemastest"
)

// stockTypes is the library's own converter, validating every object it converts.
var stockTypes = sync.OnceValue(func() managedfields.TypeConverter { return applyconfigurations.NewTypeConverter(schemas.Scheme) })

var allowDuplicates = []typed.ValidationOptions{typed.AllowDuplicates}

// builtinKinds are the kinds whose field managers convert with builtinTypes.
func builtinKinds(t *testing.T) []*schemas.Kind {
	t.Helper()
	var out []*schemas.Kind
	for _, k := range schemas.Kinds() {
		if k.Custom != nil {
			continue
		}
		if tc, err := typeConverterFor(k.GVK); err == nil && tc == builtinTypes() {
			out = append(out, k)
		}
	}
	if len(out) < 25 {
		t.Fatalf("only %d built-in kinds", len(out))
	}
	return out
}

func newOf(k *schemas.Kind) runtime.Object {
	obj := k.New()
	setTypeMeta(obj, k)
	return obj
}

func newFiller(t *testing.T) *randfill.Filler {
	seed := time.Now().UnixNano()
	t.Logf("fuzz seed %d", seed)
	return fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(seed), schemas.Codecs).NilChance(0.2).NumElements(1, 3).MaxDepth(8)
}

// fuzzed is a random object of kind k, its kind set.
func fuzzed(f *randfill.Filler, k *schemas.Kind) runtime.Object {
	obj := k.New()
	f.Fill(obj)
	setTypeMeta(obj, k)
	return obj
}

// Every built-in kind skips the validation walk but ServiceAccount, whose secrets' items
// (object references keyed by a name the Go type may omit) can fail it; conversions that
// refuse duplicates and unstructured objects always validate.
func TestUnvalidatedTypesCoverTheBuiltInKinds(t *testing.T) {
	u, ok := builtinTypes().(*unvalidatedTypes)
	if !ok {
		t.Fatalf("builtinTypes is %T", builtinTypes())
	}
	var validated []string
	for _, k := range builtinKinds(t) {
		obj := newOf(k)
		if _, ok := u.unvalidated(obj, allowDuplicates); !ok {
			validated = append(validated, k.GVK.Kind)
		}
		if _, ok := u.unvalidated(obj, nil); ok {
			t.Errorf("%s: converted without validation where duplicates are refused", k.GVK.Kind)
		}
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := u.unvalidated(&unstructured.Unstructured{Object: raw}, allowDuplicates); ok {
			t.Errorf("%s: an unstructured object converted without validation", k.GVK.Kind)
		}
	}
	if fmt.Sprint(validated) != "[ServiceAccount]" {
		t.Fatalf("kinds still validated: %v, want [ServiceAccount]", validated)
	}
}

// converted is one conversion's outcome: its value, error, or panic.
type converted struct {
	tv    *typed.TypedValue
	err   error
	panic any
}

func convert(tc managedfields.TypeConverter, obj runtime.Object, opts []typed.ValidationOptions) (c converted) {
	defer func() { c.panic = recover() }()
	c.tv, c.err = tc.ObjectToTyped(obj, opts...)
	return c
}

// sameConversion: obj converts to the same typed value, error or panic with either converter;
// fast is whether builtinTypes skipped the validation.
func sameConversion(t *testing.T, what string, obj runtime.Object, opts []typed.ValidationOptions) (fast bool) {
	t.Helper()
	u := builtinTypes().(*unvalidatedTypes)
	_, fast = u.unvalidated(obj, opts)
	a, b := convert(stockTypes(), obj, opts), convert(u, obj, opts)
	switch {
	case (a.panic == nil) != (b.panic == nil):
		t.Fatalf("%s: panics: library %v, unvalidated %v", what, a.panic, b.panic)
	case fmt.Sprint(a.err) != fmt.Sprint(b.err):
		t.Fatalf("%s: library: %v\nunvalidated (fast %v): %v", what, a.err, fast, b.err)
	case a.tv == nil || b.tv == nil:
		if (a.tv == nil) != (b.tv == nil) {
			t.Fatalf("%s: values %v and %v", what, a.tv, b.tv)
		}
	}
	if a.tv != nil {
		ra, rb := a.tv.TypeRef(), b.tv.TypeRef()
		if a.tv.Schema() != b.tv.Schema() || !ra.Equals(&rb) || !value.Equals(a.tv.AsValue(), b.tv.AsValue()) {
			t.Fatalf("%s: typed values differ: %v %v", what, ra, rb)
		}
	}
	return fast
}

// Fuzzed objects of every built-in kind convert as the library converts them, most without
// the validation walk.
func TestUnvalidatedTypesConvertAsTheLibrary(t *testing.T) {
	f := newFiller(t)
	fast, n := 0, 0
	for _, k := range builtinKinds(t) {
		for i := range 20 {
			obj := fuzzed(f, k)
			for _, opts := range [][]typed.ValidationOptions{allowDuplicates, nil} {
				if sameConversion(t, fmt.Sprintf("%s #%d %v", k.GVK.Kind, i, opts), obj, opts) {
					fast++
				}
			}
			n++
		}
	}
	if fast < n*3/4 {
		t.Fatalf("only %d of %d fuzzed objects skipped the validation", fast, n)
	}
}

// Objects validation has something to say about: duplicate keys (kube allows duplicate env
// names), items missing key fields (with and without a schema default), managedFields sets
// that are not JSON objects, raw JSON of every shape. Each converts as the library converts
// it; the ones validation may refuse are validated.
func TestUnvalidatedTypesEdgeCases(t *testing.T) {
	pod := func(change func(*corev1.Pod)) *corev1.Pod {
		p := controllerPod()
		change(p)
		return p
	}
	withFields := func(raw string) *corev1.Pod {
		return pod(func(p *corev1.Pod) {
			p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(raw)}}}
		})
	}
	withTemplateFields := func(raw string) *corev1.Pod {
		return pod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
				VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{
					Manager: "m", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(raw)}}}}}}}}}
		})
	}
	revision := func(raw string) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ControllerRevision"},
			ObjectMeta: metav1.ObjectMeta{Name: "r"}, Data: runtime.RawExtension{Raw: []byte(raw)}}
	}
	cases := []struct {
		name string
		obj  runtime.Object
		fast bool // with duplicates allowed
	}{
		{"duplicate env names", pod(func(p *corev1.Pod) {
			c := &p.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "MODE", Value: "dev"}, corev1.EnvVar{Name: "MODE"})
		}), true},
		{"duplicate containers", pod(func(p *corev1.Pod) { p.Spec.Containers = append(p.Spec.Containers, p.Spec.Containers[0]) }), true},
		{"a port without its protocol key", pod(func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].Protocol = "" }), true},
		{"an image pull secret without its name key", pod(func(p *corev1.Pod) { p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{}} }), true},
		{"a service port without its protocol key", &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}, {Port: 80}}}}, true},
		{"a service account secret missing every key", &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			Secrets: []corev1.ObjectReference{{Kind: "Secret"}}}, false},
		{"a service account secret with its key", &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			Secrets: []corev1.ObjectReference{{Name: "s"}}}, false},
		{"a probe port of neither int nor string", pod(func(p *corev1.Pod) {
			p.Spec.Containers[0].ReadinessProbe.HTTPGet.Port = intstr.IntOrString{Type: 7}
		}), false},
		{"a probe port by name", pod(func(p *corev1.Pod) { p.Spec.Containers[0].ReadinessProbe.HTTPGet.Port = intstr.FromString("http") }), true},
		{"fields as an object", withFields(`{"f:metadata":{"f:labels":{}}}`), true},
		{"fields empty", withFields(``), true},
		{"fields null", withFields(`null`), true},
		{"fields a list", withFields(`[1]`), false},
		{"fields a string", withFields(`"f:spec"`), false},
		{"fields a number", withFields(`7`), false},
		{"fields after a space", withFields(` {}`), false},
		{"fields not JSON", withFields(`{"f:spec":`), false},
		{"fields in CBOR", withFields("\xa0"), true},
		{"fields a list in CBOR", withFields("\x80"), false},
		{"a claim template's fields a list", withTemplateFields(`[]`), false},
		{"a claim template's fields an object", withTemplateFields(`{}`), true},
		{"revision data an object", revision(`{"spec":{"replicas":2}}`), true},
		{"revision data a list", revision(`[1,"a",{"b":null}]`), true},
		{"revision data a string", revision(`"s"`), true},
		{"revision data a number", revision(`2.5`), true},
		{"revision data null", revision(`null`), true},
		{"revision data unset", &appsv1.ControllerRevision{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ControllerRevision"}}, true},
		{"revision data empty", revision(``), false},
		{"revision data not JSON", revision(`{"a":`), false},
	}
	for _, c := range cases {
		if fast := sameConversion(t, c.name, c.obj, allowDuplicates); fast != c.fast {
			t.Errorf("%s: validation skipped %v, want %v", c.name, fast, c.fast)
		}
		if sameConversion(t, c.name+" (duplicates refused)", c.obj, nil) {
			t.Errorf("%s: validation skipped where duplicates are refused", c.name)
		}
	}
}

// bothManagers are a kind's field managers for an endpoint over the library's converter and
// over builtinTypes.
func bothManagers(t *testing.T, k *schemas.Kind, sub string) [2]*managedfields.FieldManager {
	t.Helper()
	var out [2]*managedfields.FieldManager
	for i, tc := range []managedfields.TypeConverter{stockTypes(), builtinTypes()} {
		fm, err := newFieldManager(tc, k, sub)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = fm
	}
	return out
}

// outcome is a field manager call's result as bytes: the object written (managedFields
// included) or the error.
func outcome(do func() (runtime.Object, error)) (out string) {
	defer func() {
		if p := recover(); p != nil {
			out = fmt.Sprint("panic: ", p)
		}
	}()
	obj, err := do()
	if err != nil {
		return "error: " + err.Error()
	}
	if obj == nil {
		return "nil"
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return "unencodable: " + err.Error()
	}
	return string(data)
}

// sameTrackingBoth: do gives the same bytes with either field manager. Times are whole
// seconds, so a second ticking between the two runs is retried.
func sameTrackingBoth(t *testing.T, what string, fms [2]*managedfields.FieldManager, do func(*managedfields.FieldManager) (runtime.Object, error)) string {
	t.Helper()
	var a, b string
	for range 3 {
		a = outcome(func() (runtime.Object, error) { return do(fms[0]) })
		b = outcome(func() (runtime.Object, error) { return do(fms[1]) })
		if a == b {
			return a
		}
	}
	t.Fatalf("%s: the field managers differ:\nlibrary:     %s\nunvalidated: %s", what, a, b)
	return ""
}

func update(live, next runtime.Object, manager string) func(*managedfields.FieldManager) (runtime.Object, error) {
	return func(fm *managedfields.FieldManager) (runtime.Object, error) {
		return fm.Update(live.DeepCopyObject(), next.DeepCopyObject(), manager)
	}
}

// Creates, updates, status and scale writes of fuzzed objects of every built-in kind record
// byte-identical managedFields with either converter.
func TestUnvalidatedTypesRecordTheSameManagedFields(t *testing.T) {
	f := newFiller(t)
	for _, k := range builtinKinds(t) {
		subs := []string{""}
		for _, s := range []string{"status", "scale"} {
			if k.HasSubresource(s) {
				subs = append(subs, s)
			}
		}
		managers := map[string][2]*managedfields.FieldManager{}
		for _, s := range subs {
			managers[s] = bothManagers(t, k, s)
		}
		for i := range 6 {
			what := fmt.Sprintf("%s #%d", k.GVK.Kind, i)
			first := fuzzed(f, k)
			mustMeta(first).SetManagedFields(nil) // a create's (the fuzzer's entries are tried on updates)
			sameTrackingBoth(t, what+" create", managers[""], update(newOf(k), first, "creator"))
			stored := managers[""][0].UpdateNoErrors(newOf(k), first.DeepCopyObject(), "creator")
			for _, s := range subs {
				next := fuzzed(f, k)
				sameTrackingBoth(t, what+" update "+s, managers[s], update(stored, next, "writer-"+s))
				sameTrackingBoth(t, what+" rewrite "+s, managers[s], update(stored, stored, "creator"))
			}
		}
	}
}

// The corpus' manifests, created, updated by another manager and applied (server-side, with
// and without a live object), record byte-identical managedFields and apply results with
// either converter; so do the edge objects.
func TestUnvalidatedTypesTrackTheCorpusAlike(t *testing.T) {
	objs := schemastest.GoodObjects(t)
	dup := controllerPod()
	dup.Spec.Containers[0].Env = append(dup.Spec.Containers[0].Env, corev1.EnvVar{Name: "MODE", Value: "dev"})
	objs = append(objs, dup, &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: "sa", Namespace: "default"}, Secrets: []corev1.ObjectReference{{Kind: "Secret"}}})
	n := 0
	for _, obj := range objs {
		k, ok := schemas.ByGVK(obj.GetObjectKind().GroupVersionKind())
		if !ok || k.Custom != nil {
			continue
		}
		if tc, err := typeConverterFor(k.GVK); err != nil || tc != builtinTypes() {
			continue
		}
		n++
		schemas.Default(obj)
		m := mustMeta(obj)
		what := k.GVK.Kind + " " + m.GetName()
		fms := bothManagers(t, k, "")
		sameTrackingBoth(t, what+" create", fms, update(newOf(k), obj, "kubectl-create"))
		stored := fms[0].UpdateNoErrors(newOf(k), obj.DeepCopyObject(), "kubectl-create")
		next := stored.DeepCopyObject()
		mustMeta(next).SetLabels(map[string]string{"edited": "yes"})
		mustMeta(next).SetManagedFields(nil)
		sameTrackingBoth(t, what+" update", fms, update(stored, next, "kubectl-edit"))
		if k.HasSubresource("status") {
			sameTrackingBoth(t, what+" status", bothManagers(t, k, "status"), update(stored, next, "kubelet"))
		}
		config, err := applyConfig(obj)
		if err != nil {
			t.Fatal(err)
		}
		for _, live := range []runtime.Object{newOf(k), stored} {
			sameTrackingBoth(t, what+" apply", fms, func(fm *managedfields.FieldManager) (runtime.Object, error) {
				return fm.Apply(live.DeepCopyObject(), config.DeepCopy(), "kubectl", false)
			})
		}
	}
	if n < 10 {
		t.Fatalf("only %d built-in objects in the corpus", n)
	}
}

// applyConfig is obj as a manifest applies it: unstructured, without what a user leaves out.
func applyConfig(obj runtime.Object) (*unstructured.Unstructured, error) {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj.DeepCopyObject())
	if err != nil {
		return nil, err
	}
	delete(raw, "status")
	if md, ok := raw["metadata"].(map[string]any); ok {
		for _, f := range []string{"creationTimestamp", "managedFields", "uid", "resourceVersion"} {
			delete(md, f)
		}
	}
	u := &unstructured.Unstructured{Object: raw}
	u.SetLabels(map[string]string{"applied": "yes"})
	return u, nil
}
