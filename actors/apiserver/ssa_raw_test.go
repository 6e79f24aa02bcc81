package apiserver_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// managers renders managedFields as manager/operation[/subresource].
func managers(es []metav1.ManagedFieldsEntry) []string {
	out := []string{}
	for _, e := range es {
		s := e.Manager + "/" + string(e.Operation)
		if e.Subresource != "" {
			s += "/" + e.Subresource
		}
		out = append(out, s)
	}
	return out
}

// Each component's writes over NATS carry its role as their manager; the user's create keeps
// its own entry beside the controller's status entry.
func TestComponentWritesNameTheirManager(t *testing.T) {
	cp := testutil.StartControlPlane(t, func(c *controlplane.Config) {
		c.NATSPort, c.NATSAuthDir = -1, filepath.Join(c.DataDir, controlplane.NATSKeysDir)
	})
	cs := newClientset(t, cp.URL())
	var d appsv1.Deployment
	if err := yaml.Unmarshal([]byte(strings.Split(dnsManifest, "---\n")[0]), &d); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, &d, metav1.CreateOptions{FieldManager: "tester"}); err != nil {
		t.Fatal(err)
	}
	rs := waitFor(ctx, t, func() (watch.Interface, error) {
		return cs.AppsV1().ReplicaSets("default").Watch(ctx, metav1.ListOptions{})
	},
		func(o any) []metav1.ManagedFieldsEntry { return o.(*appsv1.ReplicaSet).ManagedFields }, "skiff-controller-manager/Update")
	if !slices.Contains(rs, "skiff-controller-manager/Update") {
		t.Fatalf("ReplicaSet managers %v", rs)
	}
	dm := waitFor(ctx, t, func() (watch.Interface, error) {
		return cs.AppsV1().Deployments("default").Watch(ctx, metav1.ListOptions{})
	},
		func(o any) []metav1.ManagedFieldsEntry { return o.(*appsv1.Deployment).ManagedFields }, "skiff-controller-manager/Update/status")
	if !slices.Contains(dm, "tester/Update") {
		t.Fatalf("Deployment managers %v: the creator's entry is gone", dm)
	}
}

// waitFor watches until an object's managers include want, and returns them.
func waitFor(ctx context.Context, t *testing.T, start func() (watch.Interface, error), fields func(any) []metav1.ManagedFieldsEntry, want string) []string {
	t.Helper()
	w, err := start()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var last []string
	for ev := range w.ResultChan() {
		if ev.Type != watch.Added && ev.Type != watch.Modified {
			continue
		}
		if last = managers(fields(ev.Object)); slices.Contains(last, want) {
			return last
		}
	}
	t.Fatalf("no %s entry; last managers %v", want, last)
	return nil
}

func TestApplyOptionsAndBadConfigurationsWriteNothing(t *testing.T) {
	a, cp := newAPI(t)
	const cmPath = "/api/v1/namespaces/default/configmaps"
	const applyType = "application/apply-patch+yaml"
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {k: v}\n"
	cases := []struct {
		method, query, contentType, body string
		code                             int
		msg                              string
	}{
		{"PATCH", "", applyType, cm, 422, "fieldManager: Required value: is required for apply patch"},
		{"PATCH", "?fieldManager=a&force=maybe", applyType, cm, 400, `force "maybe" is not a boolean`},
		{"PATCH", "?fieldManager=a", applyType, strings.Replace(cm, "\ndata:", "\ndta:", 1), 400, "dta: unknown field"},
		{"PATCH", "?fieldManager=a", applyType, strings.Replace(cm, "{name: c}", "{name: other}", 1), 400, "does not match the name on the URL"},
		{"PATCH", "?fieldManager=" + strings.Repeat("m", 129), applyType, cm, 422, "fieldManager: Too long: may not be more than 128 bytes"},
		{"POST", "?fieldManager=" + strings.Repeat("m", 129), "application/yaml", cm, 422, "fieldManager: Too long: may not be more than 128 bytes"},
	}
	before := cp.Log.Rev()
	for _, c := range cases {
		path := cmPath
		if c.method == "PATCH" {
			path += "/c"
		}
		code, out := a.do(c.method, path+c.query, c.contentType, c.body)
		if msg, _ := out["message"].(string); code != c.code || !strings.Contains(msg, c.msg) {
			t.Errorf("%s %s: %d %q, want %d with %q", c.method, c.query, code, msg, c.code, c.msg)
		}
	}
	if cp.Log.Rev() != before {
		t.Fatalf("refused requests wrote: revision %d -> %d", before, cp.Log.Rev())
	}

	// Apply creates; a merge patch may not force; another manager's apply conflicts by name.
	created := a.mustDo(201, "PATCH", cmPath+"/c?fieldManager=a", applyType, cm) // 201: the apply created it
	if ms := get(created, "metadata", "managedFields").([]any); len(ms) != 1 || get(ms[0].(map[string]any), "operation") != "Apply" {
		t.Fatalf("applied object's managedFields: %v", ms)
	}
	if code, out := a.do("PATCH", cmPath+"/c?force=true", "application/merge-patch+json", `{"data":{"k":"w"}}`); code != 422 ||
		!strings.Contains(out["message"].(string), "force: Forbidden: may not be specified for non-apply patch") {
		t.Fatalf("merge patch with force: %d %v", code, out)
	}
	code, out := a.do("PATCH", cmPath+"/c?fieldManager=b", applyType, strings.Replace(cm, "k: v", "k: w", 1))
	if want := `Apply failed with 1 conflict: conflict with "a": .data.k`; code != 409 || out["message"] != want {
		t.Fatalf("conflicting apply: %d %q, want 409 %q", code, out["message"], want)
	}
	a.mustDo(200, "PATCH", cmPath+"/c?fieldManager=b&force=true", applyType, strings.Replace(cm, "k: v", "k: w", 1))
	// a no longer owns data.k: its next apply without it leaves b's value alone.
	got := a.mustDo(200, "PATCH", cmPath+"/c?fieldManager=a", applyType, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
	if get(got, "data", "k") != "w" {
		t.Fatalf("a's apply removed b's field: %v", get(got, "data"))
	}
}
