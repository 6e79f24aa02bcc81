package schemas_test

import (
	"bytes"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/schemastest"
)

func seedCorpus(f *testing.F) {
	good := schemastest.GoodManifests(f)
	for _, n := range schemastest.Names(good) {
		f.Add(good[n])
	}
	for _, c := range schemastest.BadManifests(f) {
		f.Add(c.Data)
	}
	for _, s := range []string{"", "---", "{}", "[]", "null", "apiVersion: v1\nkind: List\nitems: [null]\n",
		"apiVersion: v1\nkind: List\nitems: 3\n", `{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"resources":{"limits":{"cpu":[]}}}]}}`,
		"apiVersion: v1\nkind: Pod\nmetadata: {creationTimestamp: 2024-01-01T00:00:00.5Z}\n", "\xff\xfe", "a: &x [*x]\n"} {
		f.Add([]byte(s))
	}
}

// FuzzDecodeManifests: never panic, and what is accepted survives encode -> decode unchanged.
// JSON keeps metav1.Time to the second, so an object with sub-second times is only required to
// encode stably from its first encoding on.
func FuzzDecodeManifests(f *testing.F) {
	seedCorpus(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := schemas.DecodeManifests(data)
		if err != nil {
			return
		}
		for _, d := range docs {
			roundTrip(t, d)
		}
	})
}

func roundTrip(t *testing.T, d schemas.Document) {
	t.Helper()
	b1, err := schemas.EncodeJSON(d.Object)
	if err != nil {
		t.Fatalf("encode accepted %s: %v", d.GVK.Kind, err)
	}
	again, err := schemas.DecodeManifests(b1)
	if err != nil || len(again) != 1 {
		t.Fatalf("re-decode of %s: %v (%d docs)", b1, err, len(again))
	}
	b2, err := schemas.EncodeJSON(again[0].Object)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b1, b2) {
		t.Fatalf("encoding not stable:\n%s\n%s", b1, b2)
	}
	if !apiequality.Semantic.DeepEqual(d.Object, again[0].Object) && !hasSubSecondTime(d.Object) {
		t.Fatalf("round trip changed the object:\n%s", b1)
	}
}

// FuzzDecodeObject: request bodies of every kind, strict and lenient; never panic, accepted bodies
// round-trip, and Default + Validate + Table cope with whatever was accepted.
func FuzzDecodeObject(f *testing.F) {
	seedCorpus(f)
	kinds := schemas.Kinds()
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		k := kinds[int(data[0])%len(kinds)]
		strict := data[0]&0x80 == 0
		obj, err := schemas.DecodeObject(k, data[1:], strict)
		if err != nil {
			return
		}
		roundTrip(t, schemas.Document{Object: obj, GVK: k.GVK})
		schemas.Default(obj)
		_ = schemas.Validate(obj)
		_ = schemas.ValidateUpdate(obj, obj.DeepCopyObject())
		_ = schemas.Table(k, []runtime.Object{obj}, time.Now())
	})
}
