package schemas_test

import (
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/schemastest"
	"k8s.io/apimachinery/pkg/api/meta"
)

// admit runs what the apiserver runs on create after decoding.
func admit(t *testing.T, d schemas.Document) []string {
	t.Helper()
	k, ok := schemas.ByGVK(d.GVK)
	if !ok {
		t.Fatalf("decoded an unknown kind %v", d.GVK)
	}
	m, err := meta.Accessor(d.Object)
	if err != nil {
		t.Fatal(err)
	}
	if k.Namespaced && m.GetNamespace() == "" {
		m.SetNamespace("default")
	}
	schemas.Default(d.Object)
	var out []string
	for _, e := range schemas.Validate(d.Object) {
		out = append(out, e.Error())
	}
	return out
}

func TestGoodManifestsDecodeAndValidate(t *testing.T) {
	good := schemastest.GoodManifests(t)
	for _, name := range schemastest.Names(good) {
		t.Run(name, func(t *testing.T) {
			docs, err := schemas.DecodeManifests(good[name])
			if err != nil {
				t.Fatal(err)
			}
			if len(docs) == 0 {
				t.Fatal("no documents")
			}
			for _, d := range docs {
				if errs := admit(t, d); len(errs) > 0 {
					t.Errorf("document %d (%s): %v", d.Index, d.GVK.Kind, errs)
				}
			}
		})
	}
}

func TestBadManifests(t *testing.T) {
	for _, c := range schemastest.BadManifests(t) {
		t.Run(c.File, func(t *testing.T) {
			docs, err := schemas.DecodeManifests(c.Data)
			switch c.Stage {
			case schemastest.StageDecode:
				if err == nil {
					t.Fatalf("decoded %d documents; want an error containing %q", len(docs), c.Error)
				}
				if !strings.Contains(err.Error(), c.Error) || !strings.Contains(err.Error(), c.Path) {
					t.Fatalf("error %q does not name %q and %q", err, c.Path, c.Error)
				}
			case schemastest.StageValidate:
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				var all []string
				for _, d := range docs {
					all = append(all, admit(t, d)...)
				}
				for _, e := range all {
					if strings.HasPrefix(e, c.Path+": ") && strings.Contains(e, c.Error) {
						return
					}
				}
				t.Fatalf("no error at %q containing %q; got %q", c.Path, c.Error, all)
			default:
				t.Fatalf("unknown stage %q", c.Stage)
			}
		})
	}
}
