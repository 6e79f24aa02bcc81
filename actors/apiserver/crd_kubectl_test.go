package apiserver_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

const kubectlWidgets = `apiVersion: example.com/v1
kind: Widget
metadata: {name: small}
spec: {size: 2, color: red}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: big}
spec: {size: 40, color: blue}
`

func TestKubectlCustomResources(t *testing.T) {
	cp := testutil.StartControlPlane(t, apiOnly)
	kubectl := kubectlEnv(t, cp.URL())
	if out, err := kubectl("apply", "-f", writeFile(t, "crd.yaml", widgetCRD)); err != nil || !strings.Contains(out, "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created") {
		t.Fatalf("kubectl apply crd: %v\n%s", err, out)
	}
	if out, err := kubectl("wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=10s"); err != nil {
		t.Fatalf("kubectl wait: %v\n%s", err, out)
	}
	// CRDs are often applied server-side (they outgrow the last-applied annotation): the
	// apiextensions kinds have a schema for managed fields too.
	if out, err := kubectl("apply", "--server-side", "-f", writeFile(t, "crd.yaml", widgetCRD)); err != nil || !strings.Contains(out, "serverside-applied") {
		t.Fatalf("kubectl apply --server-side crd: %v\n%s", err, out)
	}
	out, err := kubectl("apply", "-f", writeFile(t, "widgets.yaml", kubectlWidgets))
	if err != nil || !strings.Contains(out, "widget.example.com/small created") {
		t.Fatalf("kubectl apply widgets: %v\n%s", err, out)
	}
	// Printer columns from the CRD, by plural, short name and category.
	for _, what := range []string{"widgets", "wd", "all"} {
		out, err = kubectl("get", what)
		if err != nil {
			t.Fatalf("kubectl get %s: %v\n%s", what, err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if !strings.Contains(out, "small") || !strings.Contains(out, "big") {
			t.Fatalf("kubectl get %s:\n%s", what, out)
		}
		if what != "all" && (len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "NAME SIZE COLOR AGE" ||
			strings.Join(strings.Fields(lines[1])[:3], " ") != "big 40 blue") {
			t.Fatalf("kubectl get %s: want the printer columns, got\n%s", what, out)
		}
	}
	// Client-side apply of a change is a merge patch; validation errors come back with the field.
	out, err = kubectl("apply", "-f", writeFile(t, "w.yaml", strings.Replace(kubectlWidgets, "size: 2", "size: 3", 1)))
	if err != nil || !strings.Contains(out, "widget.example.com/small configured") {
		t.Fatalf("kubectl apply change: %v\n%s", err, out)
	}
	out, err = kubectl("apply", "-f", writeFile(t, "bad.yaml", strings.Replace(kubectlWidgets, "size: 2", "size: 0", 1)))
	if err == nil || !strings.Contains(out, "spec.size") {
		t.Fatalf("kubectl apply invalid: want an error naming spec.size, got %v\n%s", err, out)
	}
	// selectableFields: spec.color is a field selector, spec.size is not.
	if out, err = kubectl("get", "widgets", "--field-selector", "spec.color=blue", "-o", "name"); err != nil || strings.TrimSpace(out) != "widget.example.com/big" {
		t.Fatalf("kubectl get --field-selector spec.color=blue: %v\n%s", err, out)
	}
	if out, err = kubectl("get", "widgets", "--field-selector", "spec.size=40"); err == nil || !strings.Contains(out, "field label not supported: spec.size") {
		t.Fatalf("spec.size is not selectable: want the refusal, got %v\n%s", err, out)
	}
	if out, err = kubectl("scale", "widget/small", "--replicas=3"); err != nil || !strings.Contains(out, "scaled") {
		t.Fatalf("kubectl scale: %v\n%s", err, out)
	}
	// The CRD's schema is in the OpenAPI documents: explain reads it.
	testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		out, err := kubectl("explain", "widgets.spec.size")
		if err != nil || !strings.Contains(out, "FIELD: size <integer>") {
			return fmt.Errorf("kubectl explain widgets.spec.size: %v\n%s", err, out)
		}
		return nil
	})
	kubectlServerSideApplyWidgets(t, kubectl)

	// get -w sees a widget created after it started.
	bin := testutil.BuildBinary(t, "./services/kubectl")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := exec.CommandContext(ctx, bin, "--server", cp.URL(), "get", "widgets", "-w", "--no-headers", "-n", "default")
	w.Env = append(os.Environ(), "HOME="+t.TempDir())
	stdout, _ := w.StdoutPipe()
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = w.Wait() }()
	lines := bufio.NewScanner(stdout)
	for i := 0; i < 2 && lines.Scan(); i++ { // the two listed first
	}
	if out, err := kubectl("create", "-f", writeFile(t, "late.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: late}\nspec: {size: 5}\n")); err != nil {
		t.Fatalf("kubectl create: %v\n%s", err, out)
	}
	for lines.Scan() {
		if f := strings.Fields(lines.Text()); len(f) > 1 && f[0] == "late" && f[1] == "5" {
			return
		}
	}
	t.Fatal("kubectl get -w did not show the widget created while it watched")
}

// Server-side apply of custom resources by the CRD's schema: managedFields, a conflict between
// two managers unless forced, a field the manager stops applying removed, schema errors named.
func kubectlServerSideApplyWidgets(t *testing.T, kubectl func(...string) (string, error)) {
	t.Helper()
	fresh := "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: fresh}\nspec: {size: 4, color: blue}\n"
	if out, err := kubectl("apply", "--server-side", "-f", writeFile(t, "fresh.yaml", fresh)); err != nil || !strings.Contains(out, "widget.example.com/fresh serverside-applied") {
		t.Fatalf("kubectl apply --server-side: %v\n%s", err, out)
	}
	if out, err := kubectl("get", "widget", "fresh", "--show-managed-fields", "-o", "jsonpath={.metadata.managedFields[*].manager}/{.metadata.managedFields[*].operation}"); err != nil || out != "kubectl/Apply" {
		t.Fatalf("managedFields of fresh: %v %q", err, out)
	}
	other := writeFile(t, "other.yaml", strings.Replace(fresh, "size: 4, color: blue", "size: 9", 1))
	out, err := kubectl("apply", "--server-side", "--field-manager=other", "-f", other)
	if err == nil || !strings.Contains(out, "conflict") || !strings.Contains(out, ".spec.size") {
		t.Fatalf("a second manager's apply: want a conflict on .spec.size, got %v\n%s", err, out)
	}
	if out, err := kubectl("apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", other); err != nil {
		t.Fatalf("forced apply: %v\n%s", err, out)
	}
	// kubectl gave up spec.size to other and now stops applying color: color is removed.
	if out, err := kubectl("apply", "--server-side", "-f", writeFile(t, "nocolor.yaml", strings.Replace(fresh, "size: 4, color: blue", "size: 9", 1))); err != nil {
		t.Fatalf("apply without color: %v\n%s", err, out)
	}
	if out, err := kubectl("get", "widget", "fresh", "-o", "jsonpath={.spec}"); err != nil || out != `{"size":9}` {
		t.Fatalf("fresh spec after the applies: %v %q, want size 9 and no color", err, out)
	}
	out, err = kubectl("apply", "--server-side", "-f", writeFile(t, "zero.yaml", strings.Replace(fresh, "size: 4", "size: 0", 1)))
	if err == nil || !strings.Contains(out, "spec.size") {
		t.Fatalf("apply of an invalid widget: want an error naming spec.size, got %v\n%s", err, out)
	}
}
