package apiserver_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

const testPod = `apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels: {app: kubectl-test}
spec:
  containers:
  - name: c
    image: skiff.local/httpecho:v1
`

// kubectlEnv points a stock kubectl, built from k8s.io/kubectl, at the control plane.
func kubectlEnv(t *testing.T, server string) func(args ...string) (string, error) {
	return kubectlWithConfig(t, "apiVersion: v1\nkind: Config\nclusters:\n- name: s\n  cluster: {server: "+server+"}\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: c\n  context: {cluster: s, user: u, namespace: default}\ncurrent-context: c\n")
}

// kubectlWithConfig runs a stock kubectl with kubeconfig cfg and a HOME of its own.
func kubectlWithConfig(t *testing.T, cfg string) func(args ...string) (string, error) {
	bin := testutil.BuildBinary(t, "./services/kubectl")
	home := t.TempDir()
	kubeconfig := filepath.Join(home, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HOME="+home)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

func writeFile(t *testing.T, name, content string) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestKubectlPodLifecycle(t *testing.T) {
	cp := testutil.StartControlPlane(t)
	kubectl := kubectlEnv(t, cp.URL())
	bin := testutil.BuildBinary(t, "./services/kubectl")

	out, err := kubectl("create", "-f", writeFile(t, "pod.yaml", strings.ReplaceAll(testPod, "%s", "one")))
	if err != nil || !strings.Contains(out, "pod/one created") {
		t.Fatalf("kubectl create: %v\n%s", err, out)
	}
	out, err = kubectl("get", "pods")
	if err != nil || !strings.Contains(out, "NAME") || !strings.Contains(out, "one") || !strings.Contains(out, "Pending") {
		t.Fatalf("kubectl get pods: %v\n%s", err, out)
	}
	out, err = kubectl("get", "pod", "one", "-o", "jsonpath={.metadata.resourceVersion} {.metadata.uid} {.spec.restartPolicy}")
	if err != nil {
		t.Fatalf("kubectl get -o jsonpath: %v\n%s", err, out)
	}
	fields := strings.Fields(out)
	if len(fields) != 3 || fields[0] == "" || fields[2] != "Always" {
		t.Fatalf("want resourceVersion, uid and the defaulted restartPolicy, got %q", out)
	}

	// get -w: a stock kubectl watch sees a pod created after it started.
	home := t.TempDir()
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	w := exec.CommandContext(watchCtx, bin, "--server", cp.URL(), "get", "pods", "-w", "--no-headers")
	w.Env = append(os.Environ(), "HOME="+home, "KUBECONFIG=/dev/null")
	stdout, _ := w.StdoutPipe()
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	waitLine(t, lines, "one")
	if out, err := kubectl("create", "-f", writeFile(t, "pod2.yaml", strings.ReplaceAll(testPod, "%s", "two"))); err != nil {
		t.Fatalf("create two: %v\n%s", err, out)
	}
	waitLine(t, lines, "two")
	stopWatch()

	out, err = kubectl("delete", "pod", "one", "two")
	if err != nil || !strings.Contains(out, `pod "one" deleted`) {
		t.Fatalf("kubectl delete: %v\n%s", err, out)
	}
	out, _ = kubectl("get", "pod", "one")
	if !strings.Contains(out, "NotFound") && !strings.Contains(out, "not found") {
		t.Fatalf("deleted pod still there: %s", out)
	}
}

func waitLine(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("watch ended before a line with %q", want)
			}
			if strings.HasPrefix(l, want+" ") {
				return
			}
		case <-timeout:
			t.Fatalf("no watch line with %q", want)
		}
	}
}

func TestKubectlDeployment(t *testing.T) {
	cp := testutil.StartControlPlane(t)
	kubectl := kubectlEnv(t, cp.URL())
	manifest := filepath.Join(testutil.RepoRoot(), "deploy", "examples", "web.yaml")
	out, err := kubectl("create", "-f", manifest)
	if err != nil || !strings.Contains(out, "deployment.apps/web created") || !strings.Contains(out, "service/web created") {
		t.Fatalf("kubectl create: %v\n%s", err, out)
	}
	out, err = kubectl("get", "deploy", "web", "-o", "jsonpath={.spec.strategy.type} {.spec.replicas} {.metadata.generation}")
	if err != nil || strings.TrimSpace(out) != "RollingUpdate 2 1" {
		t.Fatalf("kubectl get deploy: %v\n%q", err, out)
	}
	out, err = kubectl("get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}")
	if err != nil || !strings.HasPrefix(out, "10.96.") {
		t.Fatalf("service has no ClusterIP from the service CIDR: %v %q", err, out)
	}
	out, err = kubectl("scale", "deploy", "web", "--replicas=5")
	if err != nil {
		t.Fatalf("kubectl scale: %v\n%s", err, out)
	}
	out, err = kubectl("get", "deploy", "web", "-o", "jsonpath={.spec.replicas} {.metadata.generation}")
	if err != nil || strings.TrimSpace(out) != "5 2" {
		t.Fatalf("after scale: %v %q", err, out)
	}
	// A typo'd field is refused with its path, and nothing is written.
	bad := strings.Replace(testPod, "containers:", "containerz:", 1)
	out, err = kubectl("create", "-f", writeFile(t, "bad.yaml", strings.ReplaceAll(bad, "%s", "bad")))
	if err == nil || !strings.Contains(out, "containerz") {
		t.Fatalf("typo accepted: %v\n%s", err, out)
	}
	if out, _ := kubectl("get", "pod", "bad"); !strings.Contains(out, "not found") {
		t.Fatalf("rejected pod was written: %s", out)
	}
	out, err = kubectl("delete", "-f", manifest)
	if err != nil || !strings.Contains(out, `deployment.apps "web" deleted`) {
		t.Fatalf("kubectl delete: %v\n%s", err, out)
	}
	if out, _ := kubectl("get", "deploy"); !strings.Contains(out, "No resources found") {
		t.Fatalf("deployment still listed: %s", out)
	}
}
