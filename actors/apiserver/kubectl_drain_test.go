package apiserver_test

import (
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

const drainManifest = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: skiff.local/httpecho:v1}]
`

const drainPDB = `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: web}}
`

// kubectlUntil runs kubectl until its output's words contain want's (a state a controller
// reaches), column widths aside.
func kubectlUntil(t *testing.T, kubectl func(...string) (string, error), want string, args ...string) string {
	t.Helper()
	var out string
	testutil.Eventually(t, 60*time.Second, 100*time.Millisecond, func() error {
		var err error
		if out, err = kubectl(args...); err != nil || !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			return &waitErr{out: out, err: err}
		}
		return nil
	})
	return out
}

type waitErr struct {
	out string
	err error
}

func (e *waitErr) Error() string { return "kubectl: " + e.out + " " + errString(e.err) }

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestKubectlDrainHonoursDisruptionBudget(t *testing.T) {
	cp := testutil.StartControlPlane(t)
	simNodes(t, cp, 2)
	kubectl := kubectlEnv(t, cp.URL())
	// Both pods on sim-0: sim-1 takes none until the drain.
	kubectlUntil(t, kubectl, "node/sim-1 cordoned", "cordon", "sim-1")
	if out, err := kubectl("apply", "-f", writeFile(t, "web.yaml", drainManifest), "-f", writeFile(t, "pdb.yaml", drainPDB)); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	// kubectl's columns, with the controller's numbers: 2 of 2 must stay, none may go.
	out := kubectlUntil(t, kubectl, "web 2 N/A 0 ", "get", "pdb", "web")
	if !strings.Contains(out, "NAME   MIN AVAILABLE   MAX UNAVAILABLE   ALLOWED DISRUPTIONS   AGE") {
		t.Fatalf("kubectl get pdb:\n%s", out)
	}
	kubectlUntil(t, kubectl, "2/2", "get", "deploy", "web")
	if out, err := kubectl("uncordon", "sim-1"); err != nil {
		t.Fatalf("uncordon: %v\n%s", err, out)
	}

	// The budget blocks the drain: kubectl cordons, then retries the 429 until its timeout.
	start := time.Now()
	out, err := kubectl("drain", "sim-0", "--ignore-daemonsets", "--timeout=4s")
	blocked := time.Since(start)
	if err == nil || !strings.Contains(out, "node/sim-0 cordoned") ||
		!strings.Contains(out, "Cannot evict pod as it would violate the pod's disruption budget.") {
		t.Fatalf("drain under a full budget: %v\n%s", err, out)
	}
	t.Logf("drain blocked by the PDB for %v", blocked.Round(time.Millisecond))
	if out, _ := kubectl("get", "pods", "-l", "app=web", "--no-headers"); strings.Count(out, "Running") != 2 {
		t.Fatalf("pods evicted despite the budget:\n%s", out)
	}

	// Let one go: drain evicts both, the second once the first's replacement runs on sim-1.
	if out, err := kubectl("patch", "pdb", "web", "--type=merge", "-p", `{"spec":{"minAvailable":1}}`); err != nil {
		t.Fatalf("patch pdb: %v\n%s", err, out)
	}
	kubectlUntil(t, kubectl, "web 1 N/A 1 ", "get", "pdb", "web")
	start = time.Now()
	out, err = kubectl("drain", "sim-0", "--ignore-daemonsets", "--timeout=50s")
	if err != nil || strings.Count(out, "evicted") != 2 || !strings.Contains(out, "node/sim-0 drained") {
		t.Fatalf("drain: %v\n%s", err, out)
	}
	t.Logf("drain of sim-0 with minAvailable=1: %v", time.Since(start).Round(time.Millisecond))
	out, _ = kubectl("get", "pods", "-l", "app=web", "-o", "jsonpath={range .items[*]}{.spec.nodeName}{\"\\n\"}{end}")
	if strings.Contains(out, "sim-0") {
		t.Fatalf("pods left on the drained node:\n%s", out)
	}
}
