package apiserver_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/needs"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// TestHelmChartLifecycle installs the chart `helm create` makes, unmodified, then upgrades,
// rolls back and uninstalls it, with Helm's OpenAPI validation on (its default). The pods need
// not run: the control plane has no node, and helm install does not --wait.
func TestHelmChartLifecycle(t *testing.T) {
	// The chart has a ServiceAccount; Helm refuses to build a release with a kind the server
	// does not describe (with `--set serviceAccount.create=false` the rest of the lifecycle passes).
	if _, ok := schemas.ByGVK(corev1.SchemeGroupVersion.WithKind("ServiceAccount")); !ok {
		needs.Skip(t, "the ServiceAccount kind is not served yet")
	}
	cp := testutil.StartControlPlane(t)
	helm := testutil.Helm(t, cp.URL(), 120*time.Second)
	kubectl := kubectlEnv(t, cp.URL())
	must := testutil.HelmMust(t, helm)
	getDeploy := func(want string) {
		t.Helper()
		out, err := kubectl("get", "deploy", "web-demo", "-o", "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].image}")
		if err != nil || out != want {
			t.Fatalf("deployment: %v %q, want %q", err, out, want)
		}
	}
	must("Creating demo", "create", "demo")
	must("STATUS: deployed", "install", "web", "./demo")
	for _, obj := range []string{"serviceaccount/web-demo", "service/web-demo", "deployment.apps/web-demo"} {
		if out, err := kubectl("get", obj); err != nil {
			t.Fatalf("after install, kubectl get %s: %v\n%s", obj, err, out)
		}
	}
	getDeploy("1 nginx:1.16.0")
	must("REVISION: 2", "upgrade", "web", "./demo", "--set", "replicaCount=3", "--set", "image.tag=1.27")
	getDeploy("3 nginx:1.27")
	// A value the chart's schema does not have is an unknown field to the server.
	if out, err := helm("upgrade", "web", "./demo", "--set", "podSecurityContext.nope=1"); err == nil || !strings.Contains(out, "nope") {
		t.Fatalf("upgrade with an unknown field: %v\n%s", err, out)
	}
	must("Rollback was a success", "rollback", "web", "1")
	getDeploy("1 nginx:1.16.0")
	out := must("deployed", "history", "web")
	if !strings.Contains(out, "Rollback to 1") {
		t.Fatalf("history lacks the rollback:\n%s", out)
	}
	must(`release "web" uninstalled`, "uninstall", "web")
	for _, obj := range []string{"serviceaccount", "service", "deployment"} {
		if out, _ := kubectl("get", obj, "web-demo"); !strings.Contains(out, "not found") {
			t.Fatalf("after uninstall, %s web-demo: %s", obj, out)
		}
	}
}
