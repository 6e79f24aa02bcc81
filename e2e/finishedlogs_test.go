package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// kubectl logs of a finished pod (a Job's, say) reads its exited container's log after the
// node has stopped it and released its IP; deleting the pod removes the log from the node.
func TestLogsOfAFinishedPod(t *testing.T) {
	n := startNode(t)
	n.apply(t, `
apiVersion: v1
kind: Pod
metadata: {name: once, labels: {app: once}}
spec:
  restartPolicy: Never
  containers:
  - name: echo
    image: skiff.local/httpecho:v1
    args: ["-exit-after", "100ms"]
`)
	var p *corev1.Pod
	testutil.Eventually(t, 90*time.Second, 100*time.Millisecond, func() error {
		pods := n.pods(t, "app=once")
		if len(pods) != 1 || pods[0].Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("pods %+v", pods)
		}
		p = pods[0]
		return nil
	})
	// The node has finished the pod: its sandbox is kept without network or processes.
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		all, err := n.agent.Runtime.List(context.Background())
		if err != nil {
			return err
		}
		for _, sb := range all {
			if sb.PodUID == string(p.UID) && sb.Finished && sb.IP == "" {
				return nil
			}
		}
		return fmt.Errorf("pod %s not finished on the node: %+v", p.UID, all)
	})

	kubectl := testutil.BuildBinary(t, "./services/kubectl")
	cmd := exec.Command(kubectl, "--server", n.cp.URL(), "logs", "once")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "KUBECONFIG=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "listening on tcp :8080") || !strings.Contains(string(out), "exiting with code 0") {
		t.Fatalf("kubectl logs of a Succeeded pod: %v %q", err, out)
	}

	if err := n.cp.Client.Delete(context.Background(), controllerkit.MustKind("", "pods"), "default", "once", nil); err != nil {
		t.Fatal(err)
	}
	dir := n.agent.Runtime.PodDir(string(p.UID))
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			return fmt.Errorf("%s remains after the pod was deleted (%v)", dir, err)
		}
		return nil
	})
}
