// Package schemastest gives tests of any package the manifest corpus in schemas/testdata: valid
// manifests, and malformed ones with the error each must produce.
package schemastest

import (
	"encoding/json"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/schemas"
)

// Stages at which a bad manifest must be refused.
const (
	StageDecode   = "decode"   // DecodeManifests fails
	StageValidate = "validate" // decodes, then Validate (after Default) fails
)

// BadCase is one malformed manifest and the error it must produce: Path is the field path that
// must be named ("" when the error is about the whole document), Error a substring of the
// message.
type BadCase struct {
	File  string `json:"file"`
	Stage string `json:"stage"`
	Path  string `json:"path"`
	Error string `json:"error"`
	Data  []byte `json:"-"`
}

// Dir is the absolute path of schemas/testdata.
func Dir() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata")
}

// BadManifests loads testdata/bad and its expectations (cases.json).
func BadManifests(t testing.TB) []BadCase {
	t.Helper()
	dir := filepath.Join(Dir(), "bad")
	raw, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []BadCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatalf("cases.json: %v", err)
	}
	for i := range cases {
		if cases[i].Data, err = os.ReadFile(filepath.Join(dir, cases[i].File)); err != nil {
			t.Fatal(err)
		}
	}
	return cases
}

// GoodManifests loads every file of testdata/good by name; each must decode and validate.
func GoodManifests(t testing.TB) map[string][]byte {
	t.Helper()
	dir := filepath.Join(Dir(), "good")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		if out[e.Name()], err = os.ReadFile(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// Names returns the keys of GoodManifests sorted.
func Names(m map[string][]byte) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// GoodObjects decodes every good manifest, in name order, and returns its documents' objects;
// a manifest that does not decode fails the test.
func GoodObjects(t testing.TB) []runtime.Object {
	t.Helper()
	good := GoodManifests(t)
	var objs []runtime.Object
	for _, name := range Names(good) {
		docs, err := schemas.DecodeManifests(good[name])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, d := range docs {
			objs = append(objs, d.Object)
		}
	}
	return objs
}
