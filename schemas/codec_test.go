package schemas_test

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/schemastest"
)

func TestDecodeManifestsShapes(t *testing.T) {
	cases := []struct {
		name  string
		in    string
		kinds []string
		index []int
	}{
		{"empty", "", nil, nil},
		{"comments only", "# nothing\n---\n# still nothing\n", nil, nil},
		{"leading separator and empty docs", "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: b}\n",
			[]string{"ConfigMap", "Secret"}, []int{0, 1}},
		{"json stream", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}} {"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n"}}`,
			[]string{"ConfigMap", "Namespace"}, []int{0, 1}},
		{"json list", `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}},{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"}}]}`,
			[]string{"Pod", "Deployment"}, []int{0, 0}},
		{"list then doc", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n1}\n",
			[]string{"ConfigMap", "Node"}, []int{0, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			docs, err := schemas.DecodeManifests([]byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			if len(docs) != len(c.kinds) {
				t.Fatalf("%d documents; want %d", len(docs), len(c.kinds))
			}
			for i, d := range docs {
				if d.GVK.Kind != c.kinds[i] || d.Index != c.index[i] {
					t.Errorf("doc %d: %s index %d; want %s index %d", i, d.GVK.Kind, d.Index, c.kinds[i], c.index[i])
				}
				if d.Object.GetObjectKind().GroupVersionKind() != d.GVK {
					t.Errorf("doc %d: TypeMeta %v; want %v", i, d.Object.GetObjectKind().GroupVersionKind(), d.GVK)
				}
			}
		})
	}
}

func TestDecodeManifestsReportsEveryBadDocument(t *testing.T) {
	in := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndatta: {}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, lables: {}}\n"
	docs, err := schemas.DecodeManifests([]byte(in))
	if err == nil || docs != nil {
		t.Fatalf("docs %v err %v", docs, err)
	}
	for _, want := range []string{"document 0 (ConfigMap): datta: unknown field", "document 2 (Pod): metadata.lables: unknown field"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	var de *schemas.DecodeError
	if !errors.As(err, &de) || de.Index != 0 || de.Kind != "ConfigMap" || len(de.Fields) != 1 || de.Fields[0].Path != "datta" {
		t.Errorf("first DecodeError = %+v", de)
	}
}

func TestDecodeObject(t *testing.T) {
	deploy, _ := schemas.Lookup("deploy")
	t.Run("sets type meta", func(t *testing.T) {
		obj, err := schemas.DecodeObject(deploy, []byte(`{"metadata":{"name":"web"},"spec":{"replicas":2}}`), true)
		if err != nil {
			t.Fatal(err)
		}
		d := obj.(*appsv1.Deployment)
		if d.APIVersion != "apps/v1" || d.Kind != "Deployment" || *d.Spec.Replicas != 2 {
			t.Fatalf("%+v", d)
		}
	})
	t.Run("yaml body", func(t *testing.T) {
		obj, err := schemas.DecodeObject(deploy, []byte("metadata:\n  name: web\n"), true)
		if err != nil || obj.(*appsv1.Deployment).Name != "web" {
			t.Fatal(obj, err)
		}
	})
	t.Run("strict names the field", func(t *testing.T) {
		_, err := schemas.DecodeObject(deploy, []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"a"},{"name":"b","imagee":"x"}]}}}}`), true)
		if err == nil || !strings.Contains(err.Error(), "spec.template.spec.containers[1].imagee: unknown field") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("lenient ignores unknown and duplicate fields", func(t *testing.T) {
		obj, err := schemas.DecodeObject(deploy, []byte(`{"spec":{"replcas":2,"replicas":1,"replicas":3}}`), false)
		if err != nil || *obj.(*appsv1.Deployment).Spec.Replicas != 3 {
			t.Fatal(obj, err)
		}
	})
	t.Run("field names are case-sensitive", func(t *testing.T) {
		if _, err := schemas.DecodeObject(deploy, []byte(`{"Spec":{"Replicas":2}}`), true); err == nil {
			t.Fatal("accepted Spec")
		}
	})
	t.Run("type errors name the field even when lenient", func(t *testing.T) {
		_, err := schemas.DecodeObject(deploy, []byte(`{"spec":{"replicas":"two"}}`), false)
		if err == nil || !strings.Contains(err.Error(), "spec.replicas: invalid type") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("wrong kind", func(t *testing.T) {
		_, err := schemas.DecodeObject(deploy, []byte(`{"apiVersion":"v1","kind":"Pod"}`), true)
		if err == nil || !strings.Contains(err.Error(), "the body is a Pod (v1) but the request is for Deployment (apps/v1)") {
			t.Fatalf("err = %v", err)
		}
	})
	for _, body := range []string{"", "   ", "[1,2]", `"str"`, "{", "a: [b"} {
		if _, err := schemas.DecodeObject(deploy, []byte(body), true); err == nil {
			t.Errorf("accepted %q", body)
		}
	}
}

func TestEncode(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	j, err := schemas.EncodeJSON(pod)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(j), `"apiVersion":"v1"`) || !strings.Contains(string(j), `"kind":"Pod"`) {
		t.Errorf("json %s", j)
	}
	if pod.Kind != "" {
		t.Error("EncodeJSON modified its argument")
	}
	y, err := schemas.EncodeYAML(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}})
	if err != nil || !strings.HasPrefix(string(y), "apiVersion: apps/v1\nkind: Deployment\n") {
		t.Errorf("yaml %q %v", y, err)
	}
	s, err := schemas.EncodeJSON(&metav1.Status{Status: metav1.StatusFailure, Code: 404})
	if err != nil || !strings.Contains(string(s), `"kind":"Status"`) || !strings.Contains(string(s), `"apiVersion":"v1"`) {
		t.Errorf("status %s %v", s, err)
	}
	if _, err := schemas.EncodeJSON(nil); err == nil {
		t.Error("encoded nil")
	}
}

// TestRoundTripCorpus: every good manifest survives decode -> encode (JSON and YAML) -> decode.
func TestRoundTripCorpus(t *testing.T) {
	good := schemastest.GoodManifests(t)
	for _, name := range schemastest.Names(good) {
		docs, err := schemas.DecodeManifests(good[name])
		if err != nil {
			t.Fatal(name, err)
		}
		for _, d := range docs {
			for _, enc := range []func(o any) ([]byte, error){
				func(o any) ([]byte, error) { return schemas.EncodeJSON(d.Object) },
				func(o any) ([]byte, error) { return schemas.EncodeYAML(d.Object) },
			} {
				b, err := enc(d.Object)
				if err != nil {
					t.Fatal(err)
				}
				again, err := schemas.DecodeManifests(b)
				if err != nil || len(again) != 1 {
					t.Fatalf("%s: re-decode: %v\n%s", name, err, b)
				}
				if !apiequality.Semantic.DeepEqual(d.Object, again[0].Object) {
					t.Errorf("%s doc %d changed in round trip", name, d.Index)
				}
			}
		}
	}
}
