package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/deploy/images/examples"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// `helm install` of the chart `helm create` makes, unmodified, with this repository's image
// set as a user would (--set); then `helm test` passes: its test pod runs `busybox` (pulled,
// as imagePullPolicy Always says, from the docker.io mirror) doing `wget <fullname>:<port>`
// over cluster DNS and the Service.
func helmInstallAndTest(t *testing.T, n *node) {
	helm := helmCmd(t, n.cp.URL())
	must := func(want string, args ...string) string {
		t.Helper()
		out, err := helm(args...)
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	must("Creating demo", "create", "demo")
	start := time.Now()
	must("STATUS: deployed", "install", "web", "./demo",
		"--set", "image.repository=skiff.local/httpecho", "--set", "image.tag=v1", "--set", "service.port=8080")
	n.waitReady(t, "app.kubernetes.io/instance=web", 1)
	t.Logf("installed and ready in %s", elapsed(start))
	start = time.Now()
	out := must("Phase:          Succeeded", "test", "web", "--timeout", "2m")
	t.Logf("helm test passed in %s:\n%s", elapsed(start), out)
	p, err := getPod(n, "web-demo-test-connection")
	if err != nil {
		t.Fatal(err)
	}
	if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].ImageID != examples.Busybox || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 0 {
		t.Fatalf("test pod's container: %+v", cs)
	}
	must(`release "web" uninstalled`, "uninstall", "web")
}

// helmCmd runs Helm v4, built from its module (a go.mod tool), against the API at server with
// a kubeconfig, caches and config of its own.
func helmCmd(t *testing.T, server string) func(args ...string) (string, error) {
	bin := testutil.BuildBinary(t, "helm.sh/helm/v4/cmd/helm")
	home := t.TempDir()
	kubeconfig := filepath.Join(home, "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: s\n  cluster: {server: " + server + "}\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: c\n  context: {cluster: s, user: u, namespace: default}\ncurrent-context: c\n"
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = home
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HOME="+home, "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
			"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}
