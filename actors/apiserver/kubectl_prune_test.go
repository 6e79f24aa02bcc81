package apiserver_test

import (
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

const pruneSet = `apiVersion: v1
kind: ConfigMap
metadata: {name: a, labels: {set: prune-test}}
---
apiVersion: v1
kind: Service
metadata: {name: web, labels: {set: prune-test}}
spec:
  selector: {app: web}
  ports: [{port: 80}]
`

func TestKubectlEndpointsAndApplyPrune(t *testing.T) {
	cp := testutil.StartControlPlane(t)
	kubectl := kubectlEnv(t, cp.URL())
	first := writeFile(t, "set.yaml", pruneSet)
	// kubectl's default prune allowlist maps every kind it names before pruning: Endpoints now
	// resolves; kinds Skiff does not serve yet (ReplicationController,
	// StatefulSet, Ingress, ...) still stop it, so the allowlist is given here.
	out, err := kubectl("apply", "-f", first, "--prune", "-l", "set=prune-test")
	if err != nil && (strings.Contains(out, "Kind=Endpoints") || strings.Contains(out, "Kind=ConfigMap")) {
		t.Fatalf("apply --prune with the default allowlist: %v\n%s", err, out)
	}
	if err != nil {
		t.Logf("default allowlist: %s", out[strings.LastIndex(out, "error:"):])
	}
	allow := []string{"--prune-allowlist=core/v1/ConfigMap", "--prune-allowlist=core/v1/Endpoints", "--prune-allowlist=core/v1/Service",
		"--prune-allowlist=core/v1/Pod", "--prune-allowlist=core/v1/Secret", "--prune-allowlist=apps/v1/Deployment"}
	if out, err := kubectl(append([]string{"apply", "-f", first, "--prune", "-l", "set=prune-test"}, allow...)...); err != nil {
		t.Fatalf("apply --prune: %v\n%s", err, out)
	}
	// The endpoints controller keeps the Service's Endpoints: selected, nothing running.
	out = kubectlUntil(t, kubectl, "web <none>", "get", "endpoints", "web")
	if !strings.Contains(out, "NAME   ENDPOINTS   AGE") {
		t.Fatalf("kubectl get endpoints:\n%s", out)
	}
	// The ConfigMap left the set: apply --prune with its default allowlist removes it.
	second := writeFile(t, "set2.yaml", pruneSet[strings.Index(pruneSet, "---\n")+4:])
	out, err = kubectl(append([]string{"apply", "-f", second, "--prune", "-l", "set=prune-test"}, allow...)...)
	if err != nil || !strings.Contains(out, "configmap/a pruned") {
		t.Fatalf("apply --prune: %v\n%s", err, out)
	}
	if out, _ := kubectl("get", "configmap", "a"); !strings.Contains(out, "not found") {
		t.Fatalf("pruned configmap still there: %s", out)
	}
}
