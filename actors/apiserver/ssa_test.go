package apiserver_test

import (
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

// dnsManifest is shaped like cluster DNS: one port number on UDP and TCP, in the Deployment's
// container and in the Service, which only the schema's merge keys (containerPort+protocol,
// port+protocol) tell apart.
const dnsManifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  labels: {app: dns}
  annotations: {skiff.test/drop: "me"}
spec:
  replicas: 2
  selector: {matchLabels: {app: dns}}
  template:
    metadata: {labels: {app: dns}}
    spec:
      containers:
      - name: coredns
        image: skiff.local/coredns:v1
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        - {name: metrics, containerPort: 9153, protocol: TCP}
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
spec:
  selector: {app: dns}
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
`

func TestKubectlServerSideApply(t *testing.T) {
	cp := testutil.StartControlPlane(t, apiOnly)
	kubectl := kubectlEnv(t, cp.URL())
	must := func(want string, args ...string) string {
		t.Helper()
		out, err := kubectl(args...)
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	manifest := writeFile(t, "dns.yaml", dnsManifest)
	for range 2 { // the second apply merges by the schema's keys: no "Duplicate value"
		out := must("deployment.apps/coredns serverside-applied", "apply", "--server-side", "-f", manifest)
		if !strings.Contains(out, "service/kube-dns serverside-applied") {
			t.Fatalf("service not applied:\n%s", out)
		}
	}
	out := must("manager: kubectl", "get", "deploy", "coredns", "-o", "yaml", "--show-managed-fields")
	for _, want := range []string{"operation: Apply", `k:{"containerPort":53,"protocol":"UDP"}`, "f:replicas: {}", `f:skiff.test/drop: {}`} {
		if !strings.Contains(out, want) {
			t.Fatalf("managedFields lack %q:\n%s", want, out)
		}
	}
	if out := must("coredns", "get", "deploy", "coredns", "-o", "yaml"); strings.Contains(out, "managedFields") {
		t.Fatalf("managedFields shown without --show-managed-fields:\n%s", out)
	}

	// Fields the manager stops applying are removed.
	dropped := strings.Replace(dnsManifest, `  annotations: {skiff.test/drop: "me"}`+"\n", "", 1)
	dropped = strings.Replace(dropped, "        - {name: metrics, containerPort: 9153, protocol: TCP}\n", "", 1)
	must("serverside-applied", "apply", "--server-side", "-f", writeFile(t, "dropped.yaml", dropped))
	out = must("", "get", "deploy", "coredns", "-o", `jsonpath={.metadata.annotations}|{.spec.template.spec.containers[0].ports[*].containerPort}`)
	if strings.TrimSpace(out) != "|53 53" {
		t.Fatalf("dropped annotation and port still there: %q", out)
	}

	// A second manager conflicts on the field the first owns, and takes it with force.
	scaled := writeFile(t, "scaled.yaml", strings.Replace(dropped, "replicas: 2", "replicas: 3", 1))
	out, err := kubectl("apply", "--server-side", "--field-manager=ops", "-f", scaled)
	if err == nil || !strings.Contains(out, `conflict with "kubectl"`) || !strings.Contains(out, ".spec.replicas") {
		t.Fatalf("second manager did not conflict: %v\n%s", err, out)
	}
	if out := must("", "get", "deploy", "coredns", "-o", "jsonpath={.spec.replicas}"); out != "2" {
		t.Fatalf("a conflicting apply wrote replicas=%s", out)
	}
	must("serverside-applied", "apply", "--server-side", "--field-manager=ops", "--force-conflicts", "-f", scaled)
	if out := must("", "get", "deploy", "coredns", "-o", "jsonpath={.spec.replicas}"); out != "3" {
		t.Fatalf("forced apply: replicas=%s", out)
	}
	// Ownership moved: now the first manager conflicts with the second.
	out, err = kubectl("apply", "--server-side", "-f", writeFile(t, "back.yaml", dropped))
	if err == nil || !strings.Contains(out, `conflict with "ops"`) {
		t.Fatalf("replicas not owned by ops after the forced apply: %v\n%s", err, out)
	}
}

func TestKubectlClientSideApplyAndUpdatesAreTracked(t *testing.T) {
	cp := testutil.StartControlPlane(t, apiOnly)
	kubectl := kubectlEnv(t, cp.URL())
	web := strings.Split(dnsManifest, "---\n")[0]
	path := writeFile(t, "web.yaml", web)
	for _, want := range []string{"deployment.apps/coredns created", "deployment.apps/coredns unchanged"} {
		if out, err := kubectl("apply", "-f", path); err != nil || !strings.Contains(out, want) {
			t.Fatalf("client-side apply: want %q: %v\n%s", want, err, out)
		}
	}
	// A dropped field goes by the last-applied annotation, as client-side apply does.
	changed := strings.Replace(web, `  annotations: {skiff.test/drop: "me"}`+"\n", "", 1)
	if out, err := kubectl("apply", "-f", writeFile(t, "web2.yaml", changed)); err != nil || !strings.Contains(out, "configured") {
		t.Fatalf("client-side apply of a change: %v\n%s", err, out)
	}
	if out, err := kubectl("scale", "deploy", "coredns", "--replicas=4"); err != nil {
		t.Fatalf("kubectl scale: %v\n%s", err, out)
	}
	out, err := kubectl("get", "deploy", "coredns", "-o", "yaml", "--show-managed-fields")
	if err != nil {
		t.Fatal(err, out)
	}
	for _, want := range []string{"manager: kubectl-client-side-apply", "operation: Update", "subresource: scale", "f:kubectl.kubernetes.io/last-applied-configuration: {}"} {
		if !strings.Contains(out, want) {
			t.Fatalf("managedFields lack %q:\n%s", want, out)
		}
	}
	if out, _ := kubectl("get", "deploy", "coredns", "-o", `jsonpath={.metadata.annotations.skiff\.test/drop}`); out != "" {
		t.Fatalf("annotation dropped from the applied manifest kept: %q", out)
	}
	// Server-side apply takes over from client-side apply: the fields kubectl set before are
	// shared, not conflicting.
	if out, err := kubectl("apply", "--server-side", "-f", writeFile(t, "web3.yaml", strings.Replace(changed, "replicas: 2", "replicas: 4", 1))); err != nil {
		t.Fatalf("server-side apply after client-side apply: %v\n%s", err, out)
	}
}
