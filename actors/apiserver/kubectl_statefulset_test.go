package apiserver_test

import (
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/simnode"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// simNodes runs n simulated nodes (Running and Ready pods) until the test ends.
func simNodes(t *testing.T, cp *controlplane.ControlPlane, n int) {
	t.Helper()
	pid, err := cp.Actors.Spawn("simnode", simnode.New(simnode.Config{Log: cp.Log, Client: cp.Client, Nodes: n}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cp.Actors.Stop(pid) })
}

const stsManifest = `apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  serviceName: web
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: img:1
`

const dbManifest = `apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  serviceName: db
  replicas: 2
  persistentVolumeClaimRetentionPolicy: {whenDeleted: Delete}
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: img:1
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
`

// TestKubectlStatefulSet runs kubectl's own StatefulSet commands against the whole control
// plane (its controller-manager runs the StatefulSet controller) with simulated nodes.
func TestKubectlStatefulSet(t *testing.T) {
	cp := testutil.StartControlPlane(t)
	simNodes(t, cp, 2)
	kubectl := kubectlEnv(t, cp.URL())
	out, err := kubectl("apply", "-f", writeFile(t, "web.yaml", stsManifest))
	if err != nil || !strings.Contains(out, "statefulset.apps/web created") {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	if out, err := kubectl("rollout", "status", "sts/web", "--timeout=60s"); err != nil || !strings.Contains(out, "complete") {
		t.Fatalf("rollout status: %v\n%s", err, out)
	}
	out, err = kubectl("get", "sts")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); err != nil || len(lines) != 2 ||
		strings.Join(strings.Fields(lines[0]), " ") != "NAME READY AGE" || !strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "web 2/2 ") {
		t.Fatalf("get sts: %v\n%s", err, out)
	}
	if out, err := kubectl("scale", "sts", "web", "--replicas=3"); err != nil || !strings.Contains(out, "statefulset.apps/web scaled") {
		t.Fatalf("scale: %v\n%s", err, out)
	}
	kubectlUntil(t, kubectl, "web 3/3", "get", "sts", "web")
	out, err = kubectl("get", "pods", "-l", "app=web", "-o", "jsonpath={range .items[*]}{.metadata.name}={.spec.hostname}.{.spec.subdomain} {end}")
	if err != nil || strings.TrimSpace(out) != "web-0=web-0.web web-1=web-1.web web-2=web-2.web" {
		t.Fatalf("pods: %v %q", err, out)
	}
	if out, _ := kubectl("get", "all"); !strings.Contains(out, "statefulset.apps/web") {
		t.Fatalf("get all:\n%s", out)
	}
	if out, err := kubectl("explain", "sts.spec.podManagementPolicy"); err != nil || !strings.Contains(out, "OrderedReady") {
		t.Fatalf("explain: %v\n%s", err, out)
	}

	// A new image rolls out; history has both revisions, and undo goes back to the first.
	if out, err := kubectl("set", "image", "sts/web", "c=img:2"); err != nil {
		t.Fatalf("set image: %v\n%s", err, out)
	}
	if out, err := kubectl("rollout", "status", "sts/web", "--timeout=60s"); err != nil || !strings.Contains(out, "complete") {
		t.Fatalf("rollout status after set image: %v\n%s", err, out)
	}
	out, err = kubectl("rollout", "history", "sts/web")
	if err != nil || !strings.Contains(out, "REVISION") || !strings.Contains(strings.Join(strings.Fields(out), " "), "1 <none> 2 <none>") {
		t.Fatalf("rollout history: %v\n%s", err, out)
	}
	if out, err := kubectl("rollout", "undo", "sts/web"); err != nil || !strings.Contains(out, "rolled back") {
		t.Fatalf("rollout undo: %v\n%s", err, out)
	}
	if out, err := kubectl("rollout", "status", "sts/web", "--timeout=60s"); err != nil || !strings.Contains(out, "complete") {
		t.Fatalf("rollout status after undo: %v\n%s", err, out)
	}
	out, err = kubectl("get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].spec.containers[0].image}")
	if err != nil || strings.TrimSpace(out) != "img:1 img:1 img:1" {
		t.Fatalf("images after undo: %v %q", err, out)
	}

	// Server-side apply of the manifest takes the replicas back to its 2: web-2 goes.
	if out, err := kubectl("apply", "--server-side", "--force-conflicts", "-f", writeFile(t, "web.yaml", stsManifest)); err != nil {
		t.Fatalf("server-side apply: %v\n%s", err, out)
	}
	kubectlUntil(t, kubectl, "web 2/2", "get", "sts", "web")
	if out, err := kubectl("get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].metadata.name}"); err != nil || strings.TrimSpace(out) != "web-0 web-1" {
		t.Fatalf("pods after server-side apply: %v %q", err, out)
	}

	// Deleting the set takes its pods and revisions with it (the garbage collector).
	if out, err := kubectl("delete", "sts", "web"); err != nil {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	kubectlUntil(t, kubectl, "No resources found", "get", "pods,controllerrevisions", "-l", "app=web")

	// A set with a claim template: each pod mounts its own claim <template>-<set>-<ordinal>,
	// provisioned on the pod's node (local-path, WaitForFirstConsumer). The simulated nodes
	// publish no local-path directory, as a kubelet does: the test gives them one.
	if out, err := kubectl("annotate", "nodes", "--all", "skiff.io/local-path-dir=/var/lib/skiff/local-path"); err != nil {
		t.Fatalf("annotate nodes: %v\n%s", err, out)
	}
	if out, err := kubectl("apply", "-f", writeFile(t, "db.yaml", dbManifest)); err != nil {
		t.Fatalf("apply db: %v\n%s", err, out)
	}
	if out, err := kubectl("rollout", "status", "sts/db", "--timeout=60s"); err != nil || !strings.Contains(out, "complete") {
		t.Fatalf("rollout status db: %v\n%s", err, out)
	}
	out, err = kubectl("get", "pods", "-l", "app=db", "-o", "jsonpath={range .items[*]}{.metadata.name}={.spec.volumes[?(@.name=='data')].persistentVolumeClaim.claimName} {end}")
	if err != nil || strings.TrimSpace(out) != "db-0=data-db-0 db-1=data-db-1" {
		t.Fatalf("db pods' claims: %v %q", err, out)
	}
	// Applied again: the templates, immutable, are as stored, so the update is accepted.
	if out, err := kubectl("apply", "-f", writeFile(t, "db.yaml", dbManifest)); err != nil || !strings.Contains(out, "statefulset.apps/db") {
		t.Fatalf("apply db again: %v\n%s", err, out)
	}
	kubectlUntil(t, kubectl, "data-db-0 Bound data-db-1 Bound", "get", "pvc", "-l", "app=db", "-o", "jsonpath={range .items[*]}{.metadata.name} {.status.phase} {end}")
	if out, err := kubectl("delete", "sts", "db"); err != nil {
		t.Fatalf("delete db: %v\n%s", err, out)
	}
	// whenDeleted: Delete: the claims go with the set.
	kubectlUntil(t, kubectl, "No resources found", "get", "pods,pvc", "-l", "app=db")

	// Bad input is refused naming the field, and nothing is written.
	for _, c := range []struct{ edit, want string }{
		{"labels: {app: other}", "spec.template.metadata.labels: Invalid value"},
		{"containers:", "spec.volumeClaimTemplates[0].spec.accessModes: Required value"},
	} {
		bad := strings.Replace(stsManifest[strings.Index(stsManifest, "---"):], "name: web\nspec:", "name: bad\nspec:", 1)
		if strings.HasPrefix(c.want, "spec.volumeClaimTemplates") {
			bad += "  volumeClaimTemplates:\n  - metadata: {name: data}\n    spec:\n      resources: {requests: {storage: 1Gi}}\n"
		} else {
			bad = strings.Replace(bad, "    metadata:\n      labels: {app: web}", "    metadata:\n      "+c.edit, 1)
		}
		out, err := kubectl("create", "-f", writeFile(t, "bad.yaml", bad))
		if err == nil || !strings.Contains(out, c.want) {
			t.Fatalf("bad statefulset accepted or refused without %q: %v\n%s", c.want, err, out)
		}
		if out, _ := kubectl("get", "sts", "bad"); !strings.Contains(out, "not found") {
			t.Fatalf("refused statefulset was written: %s", out)
		}
		if out, _ := kubectl("get", "pvc", "data-bad-0"); !strings.Contains(out, "not found") {
			t.Fatalf("a refused statefulset's claim was written: %s", out)
		}
	}
}
