package schemas_test

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/schemastest"
)

func mustKind(t testing.TB, gvk schema.GroupVersionKind) *schemas.Kind {
	t.Helper()
	k, ok := schemas.ByGVK(gvk)
	if !ok {
		t.Fatalf("%v is not served", gvk)
	}
	return k
}

func mustEncodeProtobuf(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	data, ok, err := schemas.EncodeProtobuf(obj)
	if err != nil || !ok {
		t.Fatalf("%T has no protobuf form (%v)", obj, err)
	}
	return data
}

// Every object of the good corpus decodes from protobuf to what it decodes to from JSON.
func TestDecodeProtobufMatchesJSON(t *testing.T) {
	good := schemastest.GoodManifests(t)
	for _, n := range schemastest.Names(good) {
		docs, err := schemas.DecodeManifests(good[n])
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		for _, d := range docs {
			k := mustKind(t, d.GVK)
			got, err := schemas.DecodeProtobuf(k, mustEncodeProtobuf(t, d.Object))
			if err != nil {
				t.Fatalf("%s %s: %v", n, d.GVK.Kind, err)
			}
			if got.GetObjectKind().GroupVersionKind() != k.GVK {
				t.Errorf("%s: decoded with GVK %v, want %v", n, got.GetObjectKind().GroupVersionKind(), k.GVK)
			}
			want, _ := schemas.EncodeJSON(d.Object)
			have, _ := schemas.EncodeJSON(got)
			if !bytes.Equal(want, have) {
				t.Errorf("%s %s: from protobuf\n%s\nfrom JSON\n%s", n, d.GVK.Kind, have, want)
			}
		}
	}
}

func TestDecodeProtobufRefusesBadBodiesNamingTheProblem(t *testing.T) {
	pods := mustKind(t, corev1.SchemeGroupVersion.WithKind("Pod"))
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	good := mustEncodeProtobuf(t, pod)
	svc := mustEncodeProtobuf(t, &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}})
	unk := envelope(t, good)
	unk.Raw = append(bytes.Clone(unk.Raw), 0x0a, 0x05) // metadata again, 5 bytes long, none there
	corrupt := wrap(t, unk)
	cases := []struct {
		name, mention string
		body          []byte
	}{
		{"empty", "empty", nil},
		{"JSON, not protobuf", "protobuf", []byte(`{"apiVersion":"v1","kind":"Pod"}`)},
		{"magic only", "empty body", good[:4]},
		{"truncated", "envelope", good[:len(good)/2]},
		{"corrupt object", "invalid protobuf Pod", corrupt},
		{"another kind", "the body is a Service (v1) but the request is for Pod (v1)", svc},
	}
	for _, c := range cases {
		obj, err := schemas.DecodeProtobuf(pods, c.body)
		if err == nil {
			t.Errorf("%s: accepted as %v", c.name, obj)
			continue
		}
		if !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%s: %q does not name %q", c.name, err, c.mention)
		}
	}
}

// An envelope without apiVersion and kind is the request's kind, as a JSON body without them is.
func TestDecodeProtobufTakesTheRequestKindWhenTheBodyNamesNone(t *testing.T) {
	pods := mustKind(t, corev1.SchemeGroupVersion.WithKind("Pod"))
	cm := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	unk := envelope(t, mustEncodeProtobuf(t, cm))
	unk.TypeMeta = runtime.TypeMeta{}
	obj, err := schemas.DecodeProtobuf(pods, wrap(t, unk))
	if err != nil {
		t.Fatal(err)
	}
	if p := obj.(*corev1.Pod); p.Name != "p" || p.Kind != "Pod" || p.APIVersion != "v1" {
		t.Errorf("decoded %s %s/%s", p.Name, p.APIVersion, p.Kind)
	}
}

// envelope is the runtime.Unknown of a protobuf body (after the 4-byte magic).
func envelope(t *testing.T, data []byte) runtime.Unknown {
	t.Helper()
	var unk runtime.Unknown
	if err := unk.Unmarshal(data[4:]); err != nil {
		t.Fatal(err)
	}
	return unk
}

func wrap(t *testing.T, unk runtime.Unknown) []byte {
	t.Helper()
	raw, err := unk.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte("k8s\x00"), raw...)
}

// FuzzDecodeProtobuf: never panic; what is accepted is of the request's kind and survives
// encode -> decode unchanged.
func FuzzDecodeProtobuf(f *testing.F) {
	for _, obj := range schemastest.GoodObjects(f) {
		if obj.GetObjectKind().GroupVersionKind().Kind == "Pod" {
			f.Add(mustEncodeProtobuf(f, obj))
		}
	}
	f.Add([]byte{0x6b, 0x38, 0x73, 0x00, 0x0a, 0x02})
	f.Add([]byte("k8s\x00"))
	pods := mustKind(f, corev1.SchemeGroupVersion.WithKind("Pod"))
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, err := schemas.DecodeProtobuf(pods, data)
		if err != nil {
			return
		}
		if obj.GetObjectKind().GroupVersionKind() != pods.GVK {
			t.Fatalf("accepted as %v", obj.GetObjectKind().GroupVersionKind())
		}
		once := mustEncodeProtobuf(t, obj)
		again, err := schemas.DecodeProtobuf(pods, once)
		if err != nil {
			t.Fatalf("re-decoding what was accepted: %v", err)
		}
		if twice := mustEncodeProtobuf(t, again); !bytes.Equal(once, twice) {
			t.Fatalf("unstable encoding:\n%x\n%x", once, twice)
		}
	})
}
