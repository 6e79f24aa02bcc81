package logvalue_test

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"

	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/defaults"
	"github.com/skiff-sh/skiff/schemas/logvalue"
	"github.com/skiff-sh/skiff/schemas/schemastest"
)

func kind(t testing.TB, group, version, resource string) *schemas.Kind {
	t.Helper()
	k, ok := schemas.ByResource(group, version, resource)
	if !ok {
		t.Fatalf("no kind %s/%s %s", group, version, resource)
	}
	return k
}

// roundTrip stores obj as kind k and reads it back at rev, checking that the value is stored
// as protobuf or JSON as wanted and that obj's resourceVersion was neither stored nor lost.
func roundTrip(t *testing.T, k *schemas.Kind, obj runtime.Object, rev uint64, wantProtobuf bool) runtime.Object {
	t.Helper()
	m, _ := meta.Accessor(obj)
	m.SetResourceVersion("918273645546372")
	value, err := logvalue.Encode(obj)
	if err != nil {
		t.Fatalf("%s: encode: %v", k.GVK, err)
	}
	if m.GetResourceVersion() != "918273645546372" {
		t.Fatalf("%s: encode changed the object's resourceVersion to %q", k.GVK, m.GetResourceVersion())
	}
	if schemas.IsProtobuf(value) != wantProtobuf {
		t.Fatalf("%s: stored as protobuf %v, want %v: %q", k.GVK, schemas.IsProtobuf(value), wantProtobuf, value[:min(len(value), 40)])
	}
	if bytes.Contains(value, []byte("918273645546372")) {
		t.Fatalf("%s: the resourceVersion was stored", k.GVK)
	}
	got, err := logvalue.Decode(k, value, rev)
	if err != nil {
		t.Fatalf("%s: decode: %v", k.GVK, err)
	}
	if got.GetObjectKind().GroupVersionKind() != k.GVK {
		t.Fatalf("decoded as %v, want %v", got.GetObjectKind().GroupVersionKind(), k.GVK)
	}
	return got
}

// Every built-in kind the apiserver serves reads back as it was written, down to every field
// a random filler sets (kube's own generic API fuzzer functions keep values valid for their
// types), resourceVersion being the revision read at.
func TestEveryBuiltInKindRoundTrips(t *testing.T) {
	filler := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(rand.Int63()), schemas.Codecs).NilChance(0.2).NumElements(1, 2).MaxDepth(8)
	n := 0
	for _, k := range schemas.Kinds() {
		if k.Custom != nil || k.StoredAs != nil || k.GVK.Group == apiextensionsv1.GroupName {
			continue // JSON, or converted: tested below
		}
		n++
		for range 20 {
			want := k.New()
			filler.Fill(want)
			want.GetObjectKind().SetGroupVersionKind(k.GVK)
			got := roundTrip(t, k, want, 42, true)
			mustMeta(t, want).SetResourceVersion("42")
			if !apiequality.Semantic.DeepEqual(want, got) {
				t.Fatalf("%s does not round-trip:\n%s", k.GVK, diff.Diff(want, got))
			}
		}
	}
	if n < 25 {
		t.Fatalf("only %d built-in kinds stored as protobuf", n)
	}
}

// The corpus' manifests, defaulted and carrying what the apiserver adds (uid, creation time,
// managedFields), read back deep-equal and serve the same JSON.
func TestRealObjectsRoundTrip(t *testing.T) {
	objs := append([]runtime.Object{realisticPod(1)}, schemastest.GoodObjects(t)...)
	at := metav1.Now().Rfc3339Copy()
	for _, obj := range objs {
		defaults.Default(obj)
		m := mustMeta(t, obj)
		m.SetUID("6f2b0c1e-1d2c-4b3a-9f8e-7d6c5b4a3921")
		if m.GetCreationTimestamp().Time.IsZero() {
			m.SetCreationTimestamp(at)
		}
		if m.GetManagedFields() == nil {
			m.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", Time: &at,
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{}}}`)}}})
		}
		k, ok := schemas.ByGVK(obj.GetObjectKind().GroupVersionKind())
		if !ok {
			t.Fatalf("no kind for %v", obj.GetObjectKind().GroupVersionKind())
		}
		got := roundTrip(t, k, obj, 7, true)
		m.SetResourceVersion("7")
		if !apiequality.Semantic.DeepEqual(obj, got) {
			t.Errorf("%s %s does not round-trip:\n%s", k.GVK.Kind, m.GetName(), diff.Diff(obj, got))
		}
		if a, b := mustJSON(t, obj), mustJSON(t, got); !bytes.Equal(a, b) {
			t.Errorf("%s %s serves other JSON once stored:\n%s\n%s", k.GVK.Kind, m.GetName(), a, b)
		}
	}
}

// An autoscaling/v1 HorizontalPodAutoscaler is stored as v2 (protobuf) and read back as v1.
func TestStoredAsIsConvertedBothWays(t *testing.T) {
	v1 := kind(t, "autoscaling", "v1", "horizontalpodautoscalers")
	h := &autoscalingv1.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{Kind: "Deployment", Name: "web", APIVersion: "apps/v1"},
			MinReplicas: ptr(int32(2)), MaxReplicas: 10, TargetCPUUtilizationPercentage: ptr(int32(70))},
	}
	h.SetGroupVersionKind(v1.GVK)
	value, err := logvalue.Encode(h)
	if err != nil {
		t.Fatal(err)
	}
	v2 := kind(t, "autoscaling", "v2", "horizontalpodautoscalers")
	stored, err := logvalue.Decode(v2, value, 3)
	if err != nil {
		t.Fatalf("the value does not read as v2: %v", err)
	}
	if m := stored.(interface{ GetName() string }); m.GetName() != "web" {
		t.Fatalf("v2 read %v", stored)
	}
	got := roundTrip(t, v1, h, 3, true)
	h.ResourceVersion = "3"
	if !apiequality.Semantic.DeepEqual(h, got) {
		t.Fatalf("v1 does not round-trip through v2:\n%s", diff.Diff(h, got))
	}
}

// Custom resources and CustomResourceDefinitions stay JSON, as in kube-apiserver's etcd.
func TestCustomKindsAndCRDsStayJSON(t *testing.T) {
	crdKind := kind(t, "apiextensions.k8s.io", "v1", "customresourcedefinitions")
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget"}}}
	crd.SetGroupVersionKind(crdKind.GVK)
	got := roundTrip(t, crdKind, crd, 9, false)
	crd.ResourceVersion = "9"
	if !apiequality.Semantic.DeepEqual(crd, got) {
		t.Fatalf("the CRD does not round-trip:\n%s", diff.Diff(crd, got))
	}

	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "default"}, "spec": map[string]any{"size": int64(3)}}}
	value, err := logvalue.Encode(u)
	if err != nil {
		t.Fatal(err)
	}
	if schemas.IsProtobuf(value) || !json.Valid(value) || !strings.Contains(string(value), `"size":3`) {
		t.Fatalf("a custom resource is stored as %q", value)
	}
}

// Values an older Skiff wrote as JSON (resourceVersion left out, apiVersion and kind in) still
// read, and read as the same object their protobuf would.
func TestJSONValuesStillRead(t *testing.T) {
	k := kind(t, "", "v1", "pods")
	pod := realisticPod(3)
	old, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	fromJSON, err := logvalue.Decode(k, old, 11)
	if err != nil {
		t.Fatalf("an old JSON value does not read: %v", err)
	}
	pb, err := logvalue.Encode(pod)
	if err != nil {
		t.Fatal(err)
	}
	fromPB, err := logvalue.Decode(k, pb, 11)
	if err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(fromJSON, fromPB) {
		t.Fatalf("JSON and protobuf values differ:\n%s", diff.Diff(fromJSON, fromPB))
	}
	if len(pb) >= len(old) {
		t.Errorf("protobuf value %d bytes, JSON %d", len(pb), len(old))
	}
	for _, v := range [][]byte{old, pb} {
		m, err := logvalue.Meta(v)
		if err != nil || m.Name != pod.Name || m.UID != pod.UID || len(m.ManagedFields) != 2 {
			t.Errorf("Meta of a %s value: %v, %v", format(v), m, err)
		}
		if n, err := logvalue.PodNodeName(v); err != nil || n != pod.Spec.NodeName {
			t.Errorf("PodNodeName of a %s value: %q, %v", format(v), n, err)
		}
	}
}

func format(v []byte) string {
	if schemas.IsProtobuf(v) {
		return "protobuf"
	}
	return "JSON"
}

// A corrupt value is refused with an error naming the resource and what is wrong, whatever
// part of it is broken.
func TestCorruptValuesAreClearErrors(t *testing.T) {
	pods := kind(t, "", "v1", "pods")
	pb, err := logvalue.Encode(realisticPod(4))
	if err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s"}}
	svcValue, err := logvalue.Encode(svc)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		value []byte
		want  string
	}{
		"truncated protobuf":     {pb[:len(pb)-7], "stored pods is corrupt"},
		"bad envelope":           {append([]byte("k8s\x00"), 0xff, 0xff), "protobuf envelope"},
		"another kind":           {svcValue, "holds a v1 Service, not a v1 Pod"},
		"truncated JSON":         {[]byte(`{"metadata":{"name":"p"`), "stored pods is corrupt"},
		"JSON of the wrong type": {[]byte(`{"spec":{"containers":"web"}}`), "stored pods is corrupt"},
	}
	for name, tc := range cases {
		obj, err := logvalue.Decode(pods, tc.value, 5)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "stored pods") {
			t.Errorf("%s: got %v, %v; want an error with %q", name, obj, err, tc.want)
		}
	}
	crd := kind(t, "apiextensions.k8s.io", "v1", "customresourcedefinitions")
	if _, err := logvalue.Decode(crd, svcValue, 5); err == nil || !strings.Contains(err.Error(), "stored as JSON") {
		t.Errorf("a protobuf value for a kind stored as JSON: %v", err)
	}
	if _, err := logvalue.Meta(pb[:len(pb)-7]); err == nil {
		t.Error("Meta of a truncated value did not fail")
	}
}

func mustMeta(t testing.TB, obj runtime.Object) metav1.Object {
	t.Helper()
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustJSON(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
