package apiserver_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

const nodePortSvc = `apiVersion: v1
kind: Service
metadata: {name: %s}
spec:
  type: %s
  selector: {app: web}
  ports:
  - {port: 80, protocol: %s%s}
`

func svcYAML(name, typ, proto, nodePort string) string {
	np := ""
	if nodePort != "" {
		np = ", nodePort: " + nodePort
	}
	return fmt.Sprintf(nodePortSvc, name, typ, proto, np)
}

// TestKubectlNodePorts: node ports are allocated from --service-node-port-range, a requested
// one is checked against the range and the ports in use (422 naming the field, nothing
// written), and a port comes free with its Service's deletion or a change of type.
func TestKubectlNodePorts(t *testing.T) {
	cp := testutil.StartControlPlane(t, func(c *controlplane.Config) { c.NodePortRange = "31000-31009" })
	kubectl := kubectlEnv(t, cp.URL())
	apply := func(name, typ, proto, nodePort string) (string, error) {
		return kubectl("apply", "-f", writeFile(t, name+".yaml", svcYAML(name, typ, proto, nodePort)))
	}
	nodePortOf := func(name string) int {
		t.Helper()
		out, err := kubectl("get", "svc", name, "-o", "jsonpath={.spec.ports[0].nodePort}")
		n, cerr := strconv.Atoi(out)
		if err != nil || cerr != nil {
			t.Fatalf("nodePort of %s: %v %q", name, err, out)
		}
		return n
	}
	notWritten := func(name string) {
		t.Helper()
		if out, _ := kubectl("get", "svc", name); !strings.Contains(out, "NotFound") {
			t.Fatalf("refused Service %s was written: %s", name, out)
		}
	}

	if out, err := apply("a", "NodePort", "TCP", "31005"); err != nil {
		t.Fatalf("apply a: %v\n%s", err, out)
	}
	// Overlap: another Service (either protocol) asking for the same port.
	for _, proto := range []string{"TCP", "UDP"} {
		out, err := apply("b", "NodePort", proto, "31005")
		if err == nil || !strings.Contains(out, "spec.ports[0].nodePort: Invalid value: 31005: provided port is already allocated") {
			t.Fatalf("overlapping nodePort (%s): %v\n%s", proto, err, out)
		}
		notWritten("b")
	}
	out, err := apply("b", "NodePort", "TCP", "32000")
	if err == nil || !strings.Contains(out, "spec.ports[0].nodePort: Invalid value: 32000: provided port is not in the valid range. The range of valid ports is 31000-31009") {
		t.Fatalf("nodePort out of range: %v\n%s", err, out)
	}
	notWritten("b")

	// The status code is 422, as kube-apiserver's.
	body := `{"apiVersion":"v1","kind":"Service","metadata":{"name":"c"},"spec":{"type":"NodePort","ports":[{"port":80,"nodePort":31005}]}}`
	resp, err := http.Post(cp.URL()+"/api/v1/namespaces/default/services", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("overlapping nodePort over HTTP: status %d, want 422", resp.StatusCode)
	}

	// Allocated ports are in the range; applying the manifest again keeps them.
	if out, err := apply("b", "NodePort", "UDP", ""); err != nil {
		t.Fatalf("apply b: %v\n%s", err, out)
	}
	b := nodePortOf("b")
	if b < 31000 || b > 31009 || b == 31005 {
		t.Fatalf("allocated nodePort %d: want a free one in 31000-31009", b)
	}
	if out, err := apply("b", "NodePort", "UDP", ""); err != nil || nodePortOf("b") != b {
		t.Fatalf("apply again: %v, nodePort %d, want %d kept\n%s", err, nodePortOf("b"), b, out)
	}

	// A LoadBalancer with externalTrafficPolicy Local gets a healthCheckNodePort too.
	lb := strings.Replace(svcYAML("lb", "LoadBalancer", "TCP", ""), "spec:\n", "spec:\n  externalTrafficPolicy: Local\n", 1)
	if out, err := kubectl("apply", "-f", writeFile(t, "lb.yaml", lb)); err != nil {
		t.Fatalf("apply lb: %v\n%s", err, out)
	}
	out, _ = kubectl("get", "svc", "lb", "-o", "jsonpath={.spec.ports[0].nodePort} {.spec.healthCheckNodePort}")
	var lbPort, hc int
	if _, err := fmt.Sscan(out, &lbPort, &hc); err != nil || hc < 31000 || hc > 31009 || hc == lbPort {
		t.Fatalf("LoadBalancer ports %q: want a nodePort and a distinct healthCheckNodePort in range", out)
	}

	// Deleting a and changing b to ClusterIP free their ports for others.
	if out, err := kubectl("delete", "svc", "a"); err != nil {
		t.Fatalf("delete a: %v\n%s", err, out)
	}
	if out, err := kubectl("patch", "svc", "b", "-p", `{"spec":{"type":"ClusterIP"}}`); err != nil {
		t.Fatalf("b to ClusterIP: %v\n%s", err, out)
	}
	if out, _ := kubectl("get", "svc", "b", "-o", "jsonpath={.spec.ports[0].nodePort}"); out != "" {
		t.Fatalf("ClusterIP Service kept nodePort %q", out)
	}
	for i, port := range []int{31005, b} {
		name := fmt.Sprintf("again%d", i)
		if out, err := apply(name, "NodePort", "TCP", strconv.Itoa(port)); err != nil {
			t.Fatalf("port %d not freed: %v\n%s", port, err, out)
		}
	}

	// healthCheckNodePort only where it means something.
	bad := strings.Replace(svcYAML("d", "NodePort", "TCP", ""), "spec:\n", "spec:\n  healthCheckNodePort: 31001\n", 1)
	out, err = kubectl("apply", "-f", writeFile(t, "d.yaml", bad))
	if err == nil || !strings.Contains(out, "spec.healthCheckNodePort: Invalid value: 31001: may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'") {
		t.Fatalf("healthCheckNodePort on a NodePort Service: %v\n%s", err, out)
	}
	notWritten("d")
}
