package e2e

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/actors/nodeapi"
)

// logsAndExecWithoutStreams: logs and exec reach the container through the apiserver's pods/log
// and pods/exec (a POST without an upgrade), and stock kubectl logs reads the same log. It runs
// in TestInteractiveDebugging, on its node and pod.
func logsAndExecWithoutStreams(t *testing.T, n *node, kubectl, pod string) {
	base := n.cp.URL() + "/api/v1/namespaces/default/pods/" + pod

	resp, err := http.Get(base + "/log")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "listening on tcp :8080") {
		t.Fatalf("pods/log: HTTP %d %q", resp.StatusCode, body)
	}

	resp, err = http.Post(base+"/exec?command=/httpecho&command=-version", "application/octet-stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	var rep nodeapi.ExecReply
	err = json.NewDecoder(resp.Body).Decode(&rep)
	resp.Body.Close()
	if err != nil || rep.ExitCode != 0 || !strings.HasPrefix(string(rep.Stdout), "httpecho") {
		t.Fatalf("pods/exec: %v %+v", err, rep)
	}

	cmd := exec.Command(kubectl, "--server", n.cp.URL(), "logs", pod, "--tail=1")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "KUBECONFIG=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "listening on tcp :8080") || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
		t.Fatalf("kubectl logs --tail=1: %v %q", err, out)
	}

	// kubectl exec speaks the WebSocket channel protocol; the exit code comes back too.
	run := func(args ...string) (string, error) {
		cmd := exec.Command(kubectl, append([]string{"--server", n.cp.URL()}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "KUBECONFIG=/dev/null")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("exec", pod, "--", "/httpecho", "-version"); err != nil || !strings.HasPrefix(out, "httpecho") {
		t.Fatalf("kubectl exec: %v %q", err, out)
	}
	out2, err := run("exec", pod, "--", "/httpecho", "-probe", "http://127.0.0.1:1/")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("kubectl exec of a failing command: want exit 1, got %v %q", err, out2)
	}
}
