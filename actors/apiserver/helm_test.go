package apiserver_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/needs"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// helmEnv runs Helm v4, built from its module (a go.mod tool), against the control plane with
// a kubeconfig, caches and config of its own.
func helmEnv(t *testing.T, server string) func(args ...string) (string, error) {
	bin := testutil.BuildBinary(t, "helm.sh/helm/v4/cmd/helm")
	home := t.TempDir()
	kubeconfig := filepath.Join(home, "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: s\n  cluster: {server: " + server + "}\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: c\n  context: {cluster: s, user: u, namespace: default}\ncurrent-context: c\n"
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = home
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HOME="+home, "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
			"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

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
	helm := helmEnv(t, cp.URL())
	kubectl := kubectlEnv(t, cp.URL())
	must := func(want string, args ...string) string {
		t.Helper()
		out, err := helm(args...)
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
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
