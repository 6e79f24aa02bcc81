package apiserver_test

import (
	"strings"
	"testing"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/kubectl/pkg/util/openapi"
	"k8s.io/kubectl/pkg/validation"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

const openapiDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: %s
spec:
  replicas: 1
  selector: {matchLabels: {app: oa}}
  template:
    metadata: {labels: {app: oa}}
    spec:
      containers:
      - name: c
        image: skiff.local/httpecho:v1
`

// TestKubectlExplain: kubectl explain reads the served OpenAPI v3 (its default) and v2 documents
// and prints k8s.io/api's field docs.
func TestKubectlExplain(t *testing.T) {
	cp := testutil.StartControlPlane(t)
	kubectl := kubectlEnv(t, cp.URL())
	const doc = "The deployment strategy to use to replace existing pods with new ones."
	for format, wants := range map[string][]string{
		"plaintext": {"GROUP:      apps\nKIND:       Deployment\nVERSION:    v1", "FIELD: strategy <DeploymentStrategy>", doc,
			"rollingUpdate\t<RollingUpdateDeployment>", "enum: Recreate, RollingUpdate"},
		"plaintext-openapiv2": {"KIND:     Deployment\nVERSION:  apps/v1", "RESOURCE: strategy <Object>", doc, "rollingUpdate\t<Object>"},
	} {
		out, err := kubectl("explain", "deployment.spec.strategy", "--output", format)
		if err != nil {
			t.Fatalf("explain --output %s: %v\n%s", format, err, out)
		}
		for _, want := range wants {
			if !strings.Contains(out, want) {
				t.Errorf("explain --output %s lacks %q:\n%s", format, want, out)
			}
		}
	}
	out, err := kubectl("explain", "pods", "--recursive")
	if err != nil {
		t.Fatalf("explain pods --recursive: %v\n%s", err, out)
	}
	for _, want := range []string{"Pod is a collection of containers that can run on a host.", "livenessProbe\t<Probe>",
		"terminationGracePeriodSeconds\t<integer>", "matchExpressions\t<[]NodeSelectorRequirement>"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain pods --recursive lacks %q", want)
		}
	}
	t.Logf("kubectl explain pods --recursive: %d lines", strings.Count(out, "\n"))
	if out, err := kubectl("explain", "deployment.spec.nope"); err == nil || !strings.Contains(out, `field "nope" does not exist`) {
		t.Errorf("explain of a missing field: %v\n%s", err, out)
	}
}

// TestKubectlApplyValidation: kubectl apply with its default validation (strict) refuses an
// unknown field and writes nothing, and applies a valid manifest. The served documents carry
// the fieldValidation parameter, so kubectl leaves the check to the server, as it does with
// kube-apiserver; its own schema validation over /openapi/v2 (what it does against servers
// without the parameter) is checked directly.
func TestKubectlApplyValidation(t *testing.T) {
	cp := testutil.StartControlPlane(t)
	kubectl := kubectlEnv(t, cp.URL())
	bad := strings.Replace(openapiDeployment, "replicas: 1", "replicas: 1\n  replicaz: 2", 1)
	out, err := kubectl("apply", "-f", writeFile(t, "bad.yaml", strings.ReplaceAll(bad, "%s", "bad")))
	if err == nil || !strings.Contains(out, "Error from server (BadRequest)") || !strings.Contains(out, "spec.replicaz: unknown field") {
		t.Fatalf("apply of an unknown field: %v\n%s", err, out)
	}
	if out, _ := kubectl("get", "deploy", "bad"); !strings.Contains(out, "not found") {
		t.Fatalf("the refused deployment was written: %s", out)
	}
	out, err = kubectl("apply", "-f", writeFile(t, "good.yaml", strings.ReplaceAll(openapiDeployment, "%s", "good")))
	if err != nil || !strings.Contains(out, "deployment.apps/good created") {
		t.Fatalf("apply of a valid manifest: %v\n%s", err, out)
	}
	// An update through apply (a strategic merge patch computed from the schemas) is checked too.
	out, err = kubectl("apply", "-f", writeFile(t, "bad2.yaml", strings.ReplaceAll(bad, "%s", "good")))
	if err == nil || !strings.Contains(out, "replicaz") {
		t.Fatalf("apply (patch) of an unknown field: %v\n%s", err, out)
	}

	// kubectl's client-side validator, fed the protobuf /openapi/v2 the server serves.
	dc := discovery.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: cp.URL()})
	schema := validation.NewSchemaValidation(openapiResources{openapi.NewOpenAPIParser(dc)})
	err = schema.ValidateBytes([]byte(strings.ReplaceAll(bad, "%s", "bad")))
	if err == nil || !strings.Contains(err.Error(), `unknown field "replicaz" in io.k8s.api.apps.v1.DeploymentSpec`) {
		t.Fatalf("client-side validation of an unknown field: %v", err)
	}
	typed := strings.Replace(openapiDeployment, "replicas: 1", "replicas: one", 1)
	if err := schema.ValidateBytes([]byte(strings.ReplaceAll(typed, "%s", "x"))); err == nil ||
		!strings.Contains(err.Error(), `invalid type for io.k8s.api.apps.v1.DeploymentSpec.replicas: got "string", expected "integer"`) {
		t.Fatalf("client-side validation of a mistyped field: %v", err)
	}
	if err := schema.ValidateBytes([]byte(strings.ReplaceAll(openapiDeployment, "%s", "x"))); err != nil {
		t.Fatalf("client-side validation of a valid manifest: %v", err)
	}
}

type openapiResources struct{ p *openapi.CachedOpenAPIParser }

func (r openapiResources) OpenAPISchema() (openapi.Resources, error) { return r.p.Parse() }

// TestKubectlExplainResourceMetrics: metrics.k8s.io is described as metrics-server's API is in
// Kubernetes, so kubectl explains NodeMetrics and PodMetrics (OpenAPI v3 and v2) and its
// client-side validation knows their fields.
func TestKubectlExplainResourceMetrics(t *testing.T) {
	cp := testutil.StartControlPlane(t)
	kubectl := kubectlEnv(t, cp.URL())
	for _, tc := range []struct{ args, wants []string }{
		{[]string{"explain", "nodes", "--api-version", "metrics.k8s.io/v1beta1"}, []string{"GROUP:      metrics.k8s.io\nKIND:       NodeMetrics\nVERSION:    v1beta1",
			"NodeMetrics sets resource usage metrics of a node.", "usage\t<map[string]Quantity> -required-", "window\t<string> -required-"}},
		{[]string{"explain", "pods.containers", "--api-version", "metrics.k8s.io/v1beta1"}, []string{"KIND:       PodMetrics", "FIELD: containers <[]ContainerMetrics>",
			"name\t<string> -required-", "usage\t<map[string]Quantity> -required-"}},
		{[]string{"explain", "nodemetrics", "--output", "plaintext-openapiv2"}, []string{"KIND:     NodeMetrics\nVERSION:  metrics.k8s.io/v1beta1",
			"timestamp\t<string> -required-"}},
	} {
		out, err := kubectl(tc.args...)
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", tc.args, err, out)
		}
		for _, want := range tc.wants {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl %v lacks %q:\n%s", tc.args, want, out)
			}
		}
	}
	dc := discovery.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: cp.URL()})
	schema := validation.NewSchemaValidation(openapiResources{openapi.NewOpenAPIParser(dc)})
	const podMetrics = "apiVersion: metrics.k8s.io/v1beta1\nkind: PodMetrics\nmetadata: {name: p, namespace: default}\ntimestamp: \"2026-01-01T00:00:00Z\"\nwindow: 10s\ncontainers:\n- {name: c, usage: {cpu: 10m}%s}\n"
	if err := schema.ValidateBytes([]byte(strings.ReplaceAll(podMetrics, "%s", ""))); err != nil {
		t.Fatalf("client-side validation of a PodMetrics: %v", err)
	}
	if err := schema.ValidateBytes([]byte(strings.ReplaceAll(podMetrics, "%s", ", cores: 1"))); err == nil ||
		!strings.Contains(err.Error(), `unknown field "cores" in io.k8s.metrics.pkg.apis.metrics.v1beta1.ContainerMetrics`) {
		t.Fatalf("client-side validation of an unknown PodMetrics field: %v", err)
	}
}
