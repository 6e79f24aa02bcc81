package apiserver_test

import (
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

// TestKubectlStorage: the default class is there, a claim without a class gets it, kubectl
// prints kube's columns, and bad volumes and claims are 422s naming the field, with nothing
// written.
func TestKubectlStorage(t *testing.T) {
	cp := testutil.StartControlPlane(t, apiOnly)
	kubectl := kubectlEnv(t, cp.URL())
	out, err := kubectl("get", "sc")
	if err != nil || !strings.Contains(out, "local-path (default)") || !strings.Contains(out, "skiff.io/local-path") ||
		!strings.Contains(out, "WaitForFirstConsumer") || !strings.Contains(out, "RECLAIMPOLICY") || !strings.Contains(out, "Delete") {
		t.Fatalf("get sc: %v\n%s", err, out)
	}
	out, err = kubectl("apply", "-f", writeFile(t, "storage.yaml", `
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: manual}
spec:
  capacity: {storage: 2Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  hostPath: {path: /srv/manual}
`))
	if err != nil || !strings.Contains(out, "persistentvolumeclaim/data created") || !strings.Contains(out, "persistentvolume/manual created") {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	out, err = kubectl("get", "pvc", "data", "-o", "jsonpath={.spec.storageClassName} {.spec.volumeMode} {.status.phase} {.metadata.finalizers}")
	if err != nil || out != `local-path Filesystem Pending ["kubernetes.io/pvc-protection"]` {
		t.Fatalf("claim: %v %q", err, out)
	}
	out, err = kubectl("get", "pvc")
	if err != nil || !strings.Contains(out, "ACCESS MODES") || !strings.Contains(out, "VOLUMEATTRIBUTESCLASS") || !strings.Contains(out, "Pending") {
		t.Fatalf("get pvc: %v\n%s", err, out)
	}
	out, err = kubectl("get", "pv", "-o", "wide")
	if err != nil || !strings.Contains(out, "RECLAIM POLICY") || !strings.Contains(out, "2Gi") || !strings.Contains(out, "RWO") ||
		!strings.Contains(out, "Retain") || !strings.Contains(out, "manual") || !strings.Contains(out, "Filesystem") {
		t.Fatalf("get pv: %v\n%s", err, out)
	}
	out, err = kubectl("explain", "storageclass.volumeBindingMode")
	if err != nil || !strings.Contains(out, "StorageClass") || !strings.Contains(out, "WaitForFirstConsumer") {
		t.Fatalf("explain: %v\n%s", err, out)
	}
	out, err = kubectl("api-resources", "--api-group=storage.k8s.io")
	if err != nil || !strings.Contains(out, "storageclasses") || !strings.Contains(out, "sc ") {
		t.Fatalf("api-resources: %v\n%s", err, out)
	}

	for _, c := range []struct{ manifest, field string }{
		{`{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"bad"},"spec":{"resources":{"requests":{"storage":"1Gi"}}}}`, "spec.accessModes: Required value"},
		{`{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"bad"},"spec":{"accessModes":["ReadWriteOnce"]}}`, "spec.resources.requests[storage]: Required value"},
		{`{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"bad"},"spec":{"accessModes":["ReadWriteMany"],"resources":{"requests":{"storage":"1Gi"}}}}`, `spec.accessModes: Unsupported value: "ReadWriteMany"`},
	} {
		out, err = kubectl("create", "-f", writeFile(t, "bad.json", c.manifest))
		if err == nil || !strings.Contains(out, c.field) {
			t.Errorf("bad claim: %v\n%s; want %q", err, out, c.field)
		}
	}
	out, err = kubectl("create", "-f", writeFile(t, "badpv.json",
		`{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"nfs"},"spec":{"capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"],"nfs":{"server":"s","path":"/x"}}}`))
	if err == nil || !strings.Contains(out, `spec.nfs: Unsupported value: "nfs"`) {
		t.Errorf("nfs volume: %v\n%s", err, out)
	}
	out, _ = kubectl("get", "pvc,pv", "-o", "name")
	if strings.Contains(out, "bad") || strings.Contains(out, "nfs") {
		t.Fatalf("a refused object was written:\n%s", out)
	}
}
