package apiserver_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

const widgetSchema = `
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - {rule: "self.size <= 100", message: "size must be at most 100"}
            properties:
              size: {type: integer, minimum: 1, default: 3, description: How many widgets.}
              color: {type: string, enum: [red, blue]}
              replicas: {type: integer}
              port: {x-kubernetes-int-or-string: true}
              extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
              template: {type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true}
          status:
            type: object
            properties:
              replicas: {type: integer}
              phase: {type: string}`

// widgetCRD has two served versions (v1 stored, v1beta1 not), conversion None, status and
// scale subresources, printer columns, a selectable field, a short name and a category.
var widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd], categories: [all]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    selectableFields:
    - {jsonPath: .spec.color}
    schema:` + widgetSchema + `
  - name: v1beta1
    served: true
    storage: false
    selectableFields:
    - {jsonPath: .spec.color}
    schema:` + widgetSchema + `
`

const widgetsPath = "/apis/example.com/v1/namespaces/default/widgets"

func toJSON(t *testing.T, y string) string {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return string(j)
}

// createWidgetCRD creates the CRD and waits until its kind is served, returning how long that took.
func createWidgetCRD(t *testing.T, a api) time.Duration {
	t.Helper()
	start := time.Now()
	out := a.mustDo(201, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json", toJSON(t, widgetCRD))
	conds, _ := get(out, "status", "conditions").([]any)
	established := false
	for _, c := range conds {
		cm := c.(map[string]any)
		if cm["type"] == "Established" && cm["status"] == "True" {
			established = true
		}
	}
	if !established || get(out, "metadata", "finalizers") == nil {
		t.Fatalf("created CRD is not Established or lacks its cleanup finalizer: %v", out)
	}
	for {
		if code, _ := a.do("GET", widgetsPath, "", ""); code == 200 {
			return time.Since(start)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("widgets not served 5s after the CRD was created")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func widget(name, spec string) string {
	return `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"` + name + `","labels":{"tier":"` + name + `"}},"spec":` + spec + `}`
}

func TestCRDServesItsKindWithSchema(t *testing.T) {
	a, _ := newAPI(t)
	took := createWidgetCRD(t, a)
	t.Logf("CRD created to widgets served: %v", took)
	if took > time.Second {
		t.Fatalf("widgets served %v after the CRD's create, want within 1s", took)
	}

	// Defaulting and pruning: size defaults to 3, an unknown field is dropped, preserved
	// subtrees and int-or-string keep what they hold, an embedded resource keeps its kind.
	out := a.mustDo(201, "POST", widgetsPath, "application/json",
		widget("a", `{"color":"red","bogus":1,"port":"http","extra":{"any":{"thing":true}},"template":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","junk":1},"data":{"k":"v"}}}`))
	if get(out, "spec", "size") != float64(3) || get(out, "spec", "bogus") != nil || get(out, "spec", "port") != "http" ||
		get(out, "spec", "extra", "any", "thing") != true || get(out, "spec", "template", "kind") != "ConfigMap" ||
		get(out, "spec", "template", "metadata", "junk") != nil {
		t.Fatalf("defaulting/pruning: %v", out["spec"])
	}
	if get(out, "metadata", "uid") == "" || get(out, "metadata", "resourceVersion") == nil {
		t.Fatalf("metadata not set: %v", out["metadata"])
	}
	// Strict field validation refuses the unknown field instead.
	if code, body := a.do("POST", widgetsPath+"?fieldValidation=Strict", "application/json", widget("strict", `{"bogus":1}`)); code != 400 || !strings.Contains(body["message"].(string), "bogus") {
		t.Fatalf("strict unknown field: %d %v", code, body)
	}

	// Schema violations: 422 naming the field, and nothing written.
	for spec, field := range map[string]string{
		`{"size":"x"}`:      "spec.size",
		`{"color":"green"}`: "spec.color",
		`{"size":0}`:        "spec.size",
		`{"size":200}`:      "size must be at most 100",
		`{"port":1.5}`:      "spec.port",
	} {
		code, body := a.do("POST", widgetsPath, "application/json", widget("bad", spec))
		msg, _ := body["message"].(string)
		if code != 422 || !strings.Contains(msg, field) {
			t.Errorf("%s: want 422 naming %s, got %d %q", spec, field, code, msg)
		}
	}
	a.mustDo(404, "GET", widgetsPath+"/bad", "", "")

	// Another served version reads the same object (conversion None).
	beta := a.mustDo(200, "GET", "/apis/example.com/v1beta1/namespaces/default/widgets/a", "", "")
	if beta["apiVersion"] != "example.com/v1beta1" || get(beta, "spec", "size") != float64(3) {
		t.Fatalf("v1beta1 read: %v", beta)
	}

	// Status only through /status; the main resource keeps the stored status.
	rv := get(out, "metadata", "resourceVersion").(string)
	st := a.mustDo(200, "PUT", widgetsPath+"/a/status", "application/json",
		`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a","resourceVersion":"`+rv+`"},"spec":{"size":9},"status":{"replicas":2,"phase":"Ready"}}`)
	if get(st, "status", "phase") != "Ready" || get(st, "spec", "size") != float64(3) {
		t.Fatalf("status update: %v", st)
	}
	upd := a.mustDo(200, "PATCH", widgetsPath+"/a", "application/merge-patch+json", `{"spec":{"size":5},"status":{"phase":"Gone"}}`)
	if get(upd, "spec", "size") != float64(5) || get(upd, "status", "phase") != "Ready" || get(upd, "metadata", "generation") != float64(2) {
		t.Fatalf("main resource update: %v", upd)
	}
	if code, _ := a.do("PATCH", widgetsPath+"/a", "application/strategic-merge-patch+json", `{"spec":{"size":6}}`); code != http.StatusUnsupportedMediaType {
		t.Fatalf("strategic merge patch of a custom resource: want 415, got %d", code)
	}

	// Scale subresource through the CRD's paths.
	sc := a.mustDo(200, "GET", widgetsPath+"/a/scale", "", "")
	if sc["kind"] != "Scale" || get(sc, "status", "replicas") != float64(2) {
		t.Fatalf("scale: %v", sc)
	}
	a.mustDo(200, "PATCH", widgetsPath+"/a/scale", "application/merge-patch+json", `{"spec":{"replicas":4}}`)
	if got := a.mustDo(200, "GET", widgetsPath+"/a", "", ""); get(got, "spec", "replicas") != float64(4) {
		t.Fatalf("scale update: %v", got["spec"])
	}

	// Selectors.
	a.mustDo(201, "POST", widgetsPath, "application/json", widget("b", `{"color":"blue","size":7}`))
	for q, want := range map[string]string{"labelSelector=tier%3Db": "b", "fieldSelector=metadata.name%3Da": "a", "fieldSelector=spec.color%3Dblue": "b"} {
		l := a.mustDo(200, "GET", widgetsPath+"?"+q, "", "")
		items, _ := l["items"].([]any)
		if len(items) != 1 || get(items[0].(map[string]any), "metadata", "name") != want || l["kind"] != "WidgetList" {
			t.Fatalf("%s: %v", q, l)
		}
	}
	if code, _ := a.do("GET", widgetsPath+"?fieldSelector=spec.size%3D7", "", ""); code != 400 {
		t.Fatalf("field selector on an unindexed field: want 400, got %d", code)
	}
}

func TestCRDTableDiscoveryAndWatch(t *testing.T) {
	a, _ := newAPI(t)
	createWidgetCRD(t, a)
	ch := watchEvents(t, a.base+widgetsPath+"?watch=true")
	a.mustDo(201, "POST", widgetsPath, "application/json", widget("w1", `{"color":"blue","size":8}`))
	expectEvents(t, ch, "ADDED w1")
	a.mustDo(200, "DELETE", widgetsPath+"/w1", "", "")
	expectEvents(t, ch, "DELETED w1")
	a.mustDo(201, "POST", widgetsPath, "application/json", widget("w2", `{"color":"red","size":9}`))

	req, _ := http.NewRequest("GET", a.base+widgetsPath, nil)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Kind    string `json:"kind"`
		Columns []struct {
			Name string `json:"name"`
		} `json:"columnDefinitions"`
		Rows []struct {
			Cells []any `json:"cells"`
		} `json:"rows"`
	}
	decodeBody(t, resp, &table)
	var cols []string
	for _, c := range table.Columns {
		cols = append(cols, c.Name)
	}
	if table.Kind != "Table" || strings.Join(cols, ",") != "Name,Size,Color,Age" || len(table.Rows) != 1 ||
		table.Rows[0].Cells[0] != "w2" || table.Rows[0].Cells[1] != float64(9) || table.Rows[0].Cells[2] != "red" {
		t.Fatalf("table: %+v", table)
	}

	groups := a.mustDo(200, "GET", "/apis", "", "")
	found := false
	for _, g := range groups["groups"].([]any) {
		gm := g.(map[string]any)
		if gm["name"] == "example.com" {
			found = true
			vs := gm["versions"].([]any)
			if len(vs) != 2 || get(gm, "preferredVersion", "version") != "v1" {
				t.Fatalf("example.com versions: %v", gm)
			}
		}
	}
	if !found {
		t.Fatalf("/apis lacks example.com: %v", groups)
	}
	rl := a.mustDo(200, "GET", "/apis/example.com/v1", "", "")
	var names []string
	for _, r := range rl["resources"].([]any) {
		rm := r.(map[string]any)
		names = append(names, rm["name"].(string))
		if rm["name"] == "widgets" && (rm["kind"] != "Widget" || rm["shortNames"].([]any)[0] != "wd" || rm["categories"].([]any)[0] != "all" || rm["namespaced"] != true) {
			t.Fatalf("widgets in discovery: %v", rm)
		}
	}
	if strings.Join(names, ",") != "widgets,widgets/status,widgets/scale" {
		t.Fatalf("example.com/v1 resources: %v", names)
	}
}

func decodeBody(t *testing.T, resp *http.Response, into any) {
	t.Helper()
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatal(err)
	}
}

func TestCRDNonStructuralSchemaIsRefused(t *testing.T) {
	a, _ := newAPI(t)
	bad := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"gadgets.example.com"},
	"spec":{"group":"example.com","scope":"Namespaced","names":{"plural":"gadgets","kind":"Gadget"},
	"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"properties":{"size":{"type":"integer"}}}}}}}]}}`
	// kube-apiserver's text, whose path names the internal form (identical version schemas
	// are validated once, as spec.validation).
	code, body := a.do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json", bad)
	msg, _ := body["message"].(string)
	if code != 422 || !strings.Contains(msg, "spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields") {
		t.Fatalf("non-structural CRD: want 422 with the reason, got %d %q", code, msg)
	}
	a.mustDo(404, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.example.com", "", "")
	a.mustDo(404, "GET", "/apis/example.com/v1/namespaces/default/gadgets", "", "")
}

func TestCRDDeletionDeletesItsObjects(t *testing.T) {
	a, _ := newAPI(t)
	createWidgetCRD(t, a)
	a.mustDo(201, "POST", widgetsPath, "application/json", widget("plain", `{}`))
	// A finalizer holds a custom object: deleting marks it, removing the finalizer removes it.
	a.mustDo(201, "POST", widgetsPath, "application/json",
		`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"held","finalizers":["example.com/hold"]},"spec":{}}`)
	out := a.mustDo(200, "DELETE", widgetsPath+"/held", "", "")
	if get(out, "metadata", "deletionTimestamp") == nil {
		t.Fatalf("delete of a held widget: %v", out)
	}

	const crdPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com"
	start := time.Now()
	a.mustDo(200, "DELETE", crdPath, "", "")
	// Terminating: the CRD stays while "held" does, and "plain" is deleted.
	for {
		code, _ := a.do("GET", widgetsPath+"/plain", "", "")
		if code == 404 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the CRD's objects were not deleted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c := a.mustDo(200, "GET", crdPath, "", "")
	if get(c, "metadata", "deletionTimestamp") == nil || !strings.Contains(toString(c["status"]), "Terminating") {
		t.Fatalf("CRD being deleted is not Terminating: %v", c)
	}
	if code, body := a.do("POST", widgetsPath, "application/json", widget("late", `{}`)); code != 403 || !strings.Contains(toString(body), "terminating") {
		t.Fatalf("create while the CRD is terminating: want 403, got %d %v", code, body)
	}
	a.mustDo(200, "PATCH", widgetsPath+"/held", "application/merge-patch+json", `{"metadata":{"finalizers":null}}`)
	for {
		code, _ := a.do("GET", crdPath, "", "")
		if code == 404 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the CRD was not removed once its objects were gone")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("CRD delete to gone (one object held by a finalizer meanwhile): %v", time.Since(start))
	for {
		if code, _ := a.do("GET", widgetsPath, "", ""); code == 404 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("widgets still served after the CRD is gone")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func toString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestCRDOwnerReferencesAreGarbageCollected(t *testing.T) {
	cp := testutil.StartControlPlane(t)
	a := api{t: t, base: cp.URL()}
	createWidgetCRD(t, a)
	w := a.mustDo(201, "POST", widgetsPath, "application/json", widget("owner", `{}`))
	uid := get(w, "metadata", "uid").(string)
	a.mustDo(201, "POST", "/api/v1/namespaces/default/configmaps", "application/json",
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dep","ownerReferences":[{"apiVersion":"example.com/v1","kind":"Widget","name":"owner","uid":"`+uid+`"}]}}`)
	start := time.Now()
	a.mustDo(200, "DELETE", widgetsPath+"/owner", "", "")
	for {
		if code, _ := a.do("GET", "/api/v1/namespaces/default/configmaps/dep", "", ""); code == 404 {
			break
		}
		if time.Since(start) > 15*time.Second {
			t.Fatal("the ConfigMap owned by a deleted Widget was not collected")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("owner Widget deleted to dependent ConfigMap gone: %v", time.Since(start))
}
