package apiserver_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

const hpaV1Path = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers"

// autoscaling/v1 is served beside v2 over the same stored (v2) objects, converted as
// kube-apiserver converts: targetCPUUtilizationPercentage is the cpu Utilization metric, and
// what v1 has no field for travels in the autoscaling.alpha.kubernetes.io annotations.
func TestHorizontalPodAutoscalerV1AndV2AreOneObject(t *testing.T) {
	a, _ := newAPI(t)
	// Written as v1, read as v2: the cpu target is a metric, minReplicas defaulted.
	v1 := a.mustDo(201, "POST", hpaV1Path, "application/json", `{"apiVersion":"autoscaling/v1","kind":"HorizontalPodAutoscaler",
		"metadata":{"name":"old"},"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":4,
		"targetCPUUtilizationPercentage":60}}`)
	if get(v1, "apiVersion") != "autoscaling/v1" || get(v1, "spec", "minReplicas") != 1.0 || get(v1, "spec", "targetCPUUtilizationPercentage") != 60.0 {
		t.Fatalf("created v1: %v", v1)
	}
	v2 := a.mustDo(200, "GET", hpaPath+"/old", "", "")
	m, _ := json.Marshal(get(v2, "spec", "metrics"))
	if get(v2, "apiVersion") != "autoscaling/v2" || string(m) != `[{"resource":{"name":"cpu","target":{"averageUtilization":60,"type":"Utilization"}},"type":"Resource"}]` ||
		get(v2, "metadata", "annotations") != nil || get(v2, "metadata", "resourceVersion") != get(v1, "metadata", "resourceVersion") {
		t.Fatalf("v1 object read as v2: %v", v2)
	}

	// Written as v2 with a memory metric and a behavior, read as v1: cpu in its field, the rest
	// in annotations; an update through v1 that leaves them keeps them.
	a.mustDo(201, "POST", hpaPath, "application/json", `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler",
		"metadata":{"name":"new"},"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"minReplicas":2,"maxReplicas":6,
		"metrics":[{"type":"Resource","resource":{"name":"memory","target":{"type":"AverageValue","averageValue":"100Mi"}}},
		           {"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":70}}}],
		"behavior":{"scaleDown":{"stabilizationWindowSeconds":30}}}}`)
	got := a.mustDo(200, "GET", hpaV1Path+"/new", "", "")
	ann, _ := get(got, "metadata", "annotations").(map[string]any)
	if get(got, "apiVersion") != "autoscaling/v1" || get(got, "spec", "targetCPUUtilizationPercentage") != 70.0 ||
		ann["autoscaling.alpha.kubernetes.io/metrics"] != `[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"100Mi"}}]` ||
		!strings.Contains(ann["autoscaling.alpha.kubernetes.io/behavior"].(string), `"stabilizationWindowSeconds":30`) {
		t.Fatalf("v2 object read as v1: %v", got)
	}
	got["spec"].(map[string]any)["maxReplicas"] = 8
	body, _ := json.Marshal(got)
	a.mustDo(200, "PUT", hpaV1Path+"/new", "application/json", string(body))
	v2 = a.mustDo(200, "GET", hpaPath+"/new", "", "")
	m, _ = json.Marshal(get(v2, "spec", "metrics"))
	if get(v2, "spec", "maxReplicas") != 8.0 || !strings.Contains(string(m), `"averageValue":"100Mi"`) || !strings.Contains(string(m), `"averageUtilization":70`) ||
		get(v2, "spec", "behavior", "scaleDown", "stabilizationWindowSeconds") != 30.0 || get(v2, "metadata", "annotations") != nil {
		t.Fatalf("after a v1 update, v2 reads %v", v2)
	}

	// A list through v1 holds both as v1, and a watch through v1 sees a v2 write as v1.
	list := a.mustDo(200, "GET", hpaV1Path, "", "")
	if items, _ := list["items"].([]any); len(items) != 2 || get(list, "apiVersion") != "autoscaling/v1" ||
		get(items[0].(map[string]any), "apiVersion") != "autoscaling/v1" {
		t.Fatalf("v1 list: %v", list)
	}
	resp, err := http.Get(a.base + hpaV1Path + "?watch=true&resourceVersion=" + get(list, "metadata", "resourceVersion").(string))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a.mustDo(200, "PATCH", hpaPath+"/old", "application/merge-patch+json", `{"spec":{"metrics":[{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":55}}}]}}`)
	var ev struct {
		Type   string         `json:"type"`
		Object map[string]any `json:"object"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ev); err != nil || ev.Type != "MODIFIED" || get(ev.Object, "apiVersion") != "autoscaling/v1" ||
		get(ev.Object, "spec", "targetCPUUtilizationPercentage") != 55.0 {
		t.Fatalf("v1 watch after a v2 patch: %v %+v", err, ev)
	}

	// A metric v1 cannot carry is refused by name.
	code, out := a.do("POST", hpaV1Path, "application/json", `{"apiVersion":"autoscaling/v1","kind":"HorizontalPodAutoscaler",
		"metadata":{"name":"qps","annotations":{"autoscaling.alpha.kubernetes.io/metrics":"[{\"type\":\"Pods\",\"pods\":{\"metricName\":\"qps\",\"targetAverageValue\":\"1\"}}]"}},
		"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":4}}`)
	if msg, _ := out["message"].(string); code != 422 || !strings.Contains(msg, "metadata.annotations") || !strings.Contains(msg, `metric type "Pods" is not supported`) {
		t.Fatalf("a Pods metric through v1: %d %v", code, out)
	}
	if code, _ := a.do("GET", hpaPath+"/qps", "", ""); code != 404 {
		t.Fatalf("the refused HPA was stored: %d", code)
	}
}

// Stock kubectl: discovery offers both versions (v2 preferred), `kubectl autoscale` creates an
// HPA, get and describe work through either version, and explain knows v1's fields.
func TestKubectlAutoscaleAndBothHPAVersions(t *testing.T) {
	cp := testutil.StartControlPlane(t)
	kubectl := kubectlEnv(t, cp.URL())
	must := func(want string, args ...string) string {
		t.Helper()
		out, err := kubectl(args...)
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("kubectl %v: %v, want %q in:\n%s", args, err, want, out)
		}
		return out
	}
	must("autoscaling/v1", "api-versions")
	must("autoscaling/v2", "api-versions")
	must("horizontalpodautoscalers   hpa          autoscaling/v2", "api-resources", "--api-group", "autoscaling")
	must("deployment.apps/web created", "create", "deployment", "web", "--image", "skiff.local/httpecho:v1")
	must("horizontalpodautoscaler.autoscaling/web autoscaled", "autoscale", "deploy", "web", "--cpu-percent=50", "--min=1", "--max=3")
	out := must("web", "get", "hpa", "web", "--no-headers")
	if f := strings.Fields(out); len(f) < 6 || f[1] != "Deployment/web" || f[2] != "cpu:" || !strings.HasSuffix(f[3], "/50%") || f[4] != "1" || f[5] != "3" {
		t.Errorf("kubectl get hpa: %q", out)
	}
	// The full resource name: kubectl drops the version of a short name (hpa.v1.autoscaling).
	must("targetCPUUtilizationPercentage: 50", "get", "horizontalpodautoscalers.v1.autoscaling", "web", "-o", "yaml")
	out = must("Deployment/web", "get", "horizontalpodautoscalers.v1.autoscaling", "--no-headers")
	if !strings.Contains(out, "/50%") {
		t.Errorf("kubectl get horizontalpodautoscalers.v1.autoscaling: %q", out)
	}
	must("averageUtilization: 50", "get", "horizontalpodautoscalers.v2.autoscaling", "web", "-o", "yaml")
	must("Reference:", "describe", "hpa", "web")
	out = must("Reference:", "describe", "horizontalpodautoscalers.v1.autoscaling", "web")
	for _, want := range []string{"Deployment/web", "Min replicas:", "Max replicas:", "resource cpu on pods"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl describe hpa lacks %q:\n%s", want, out)
		}
	}
	must("targetCPUUtilizationPercentage\t<integer>", "explain", "hpa.spec", "--api-version", "autoscaling/v1")

	// Server-side apply through v1, twice (the second a change of the applied field), then a
	// v2 apply by another manager of a field v1 carries in an annotation.
	const applied = "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata: {name: ssa}\nspec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n  maxReplicas: %d\n  targetCPUUtilizationPercentage: 40\n"
	must("horizontalpodautoscaler.autoscaling/ssa serverside-applied", "apply", "--server-side", "-f", writeFile(t, "ssa.yaml", fmt.Sprintf(applied, 4)))
	must("horizontalpodautoscaler.autoscaling/ssa serverside-applied", "apply", "--server-side", "-f", writeFile(t, "ssa.yaml", fmt.Sprintf(applied, 5)))
	out = must("maxReplicas: 5", "get", "hpa", "ssa", "-o", "yaml", "--show-managed-fields")
	if !strings.Contains(out, "apiVersion: autoscaling/v1\n    fieldsType: FieldsV1") || !strings.Contains(out, "averageUtilization: 40") {
		t.Errorf("after a v1 apply, v2 reads:\n%s", out)
	}
}

// RBAC names group and resource, not version: one rule on autoscaling's horizontalpodautoscalers
// covers v1 and v2 alike, and its absence refuses both (the bootstrap "edit" role included).
func TestRBACCoversBothHPAVersions(t *testing.T) {
	a, cp := newSecureAPI(t)
	admin, bob := a.admin(), a.as("bob-token")
	const v1Body = `{"apiVersion":"autoscaling/v1","kind":"HorizontalPodAutoscaler","metadata":{"name":"web"},"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":3}}`
	admin.mustDo(http.StatusCreated, "POST", hpaV1Path, v1Body)
	for _, path := range []string{hpaV1Path + "/web", hpaPath + "/web"} {
		refused(t, cp, bob, "GET", path, "", http.StatusForbidden,
			`horizontalpodautoscalers.autoscaling "web" is forbidden: User "bob" cannot get resource "horizontalpodautoscalers" in API group "autoscaling" in the namespace "default"`)
	}
	admin.mustDo(http.StatusCreated, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"bob-edits"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"edit"},"subjects":[{"kind":"User","name":"bob"}]}`)
	testutil.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
		if code, out, _ := bob.do("GET", hpaV1Path+"/web", ""); code != http.StatusOK {
			return fmt.Errorf("bob's v1 get after the binding: %d %v", code, out["message"])
		}
		return nil
	})
	if got := bob.mustDo(http.StatusOK, "GET", hpaPath+"/web", ""); get(got, "apiVersion") != "autoscaling/v2" {
		t.Fatalf("bob's v2 get: %v", got)
	}
	bob.mustDo(http.StatusOK, "DELETE", hpaV1Path+"/web", "")
}
