package apiserver_test

import (
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

// TestKubectlNetworkPolicy: kubectl applies, lists and explains NetworkPolicies with kube's
// defaults and columns; bad policies are 422s naming the field, with nothing written.
func TestKubectlNetworkPolicy(t *testing.T) {
	cp := testutil.StartControlPlane(t, apiOnly)
	kubectl := kubectlEnv(t, cp.URL())
	out, err := kubectl("apply", "-f", writeFile(t, "netpol.yaml", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress:
  - from: [{podSelector: {matchLabels: {role: client}}}]
    ports: [{port: 8080, endPort: 8090}]
`))
	if err != nil || !strings.Contains(out, "networkpolicy.networking.k8s.io/web created") {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	out, err = kubectl("get", "netpol", "web", "-o", "jsonpath={.spec.policyTypes} {.spec.ingress[0].ports[0].protocol}")
	if err != nil || out != `["Ingress"] TCP` {
		t.Fatalf("defaults: %v %q", err, out)
	}
	out, err = kubectl("get", "networkpolicies")
	if err != nil || !strings.Contains(out, "POD-SELECTOR") || !strings.Contains(out, "app=web") {
		t.Fatalf("get: %v\n%s", err, out)
	}
	out, err = kubectl("explain", "networkpolicy.spec.ingress.ports.endPort")
	if err != nil || !strings.Contains(out, "NetworkPolicy") {
		t.Fatalf("explain: %v\n%s", err, out)
	}
	out, err = kubectl("api-resources", "--api-group=networking.k8s.io")
	if err != nil || !strings.Contains(out, "networkpolicies") || !strings.Contains(out, "netpol") {
		t.Fatalf("api-resources: %v\n%s", err, out)
	}
	for _, c := range []struct{ manifest, field string }{
		{`{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"bad"},"spec":{"podSelector":{},"ingress":[{"from":[{"ipBlock":{"cidr":"10.0.0.0/8","except":["11.0.0.0/16"]}}]}]}}`,
			"spec.ingress[0].from[0].ipBlock.except[0]: Invalid value: \"11.0.0.0/16\": must be a strict subset of `cidr`"},
		{`{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"bad"},"spec":{"podSelector":{},"egress":[{"to":[{}]}]}}`,
			"spec.egress[0].to[0]: Required value: must specify a peer"},
		{`{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"bad"},"spec":{"podSelector":{},"ingress":[{"ports":[{"port":"http","endPort":90}]}]}}`,
			"spec.ingress[0].ports[0].endPort: Invalid value: 90: may not be specified when `port` is non-numeric"},
	} {
		out, err = kubectl("create", "-f", writeFile(t, "bad.json", c.manifest))
		if err == nil || !strings.Contains(out, c.field) {
			t.Errorf("bad policy: %v\n%s; want %q", err, out, c.field)
		}
	}
	out, _ = kubectl("get", "netpol", "-o", "name")
	if strings.Contains(out, "bad") {
		t.Fatalf("a refused policy was written:\n%s", out)
	}
}
