// Package echoapp writes the manifests the end-to-end tests run: a Deployment of the httpecho
// test image (readiness on /ready, answering who it is) with its Service, and client pods to
// probe from.
package echoapp

import (
	"fmt"
	"strings"
)

// Image is the test image every e2e node imports (go tool task images).
const Image = "skiff.local/httpecho:v1"

// App describes one echo Deployment and its Service (port 80 -> the pods' 8080).
type App struct {
	Name     string
	Replicas int // default 2
	// PodSpec is YAML placed in the pod template's spec before the containers (placement:
	// nodeSelector, affinity, topologySpreadConstraints), written unindented.
	PodSpec string
	// ServicePorts are extra Service port lines, e.g. "- {name: dns, port: 53, targetPort: 8080, protocol: UDP}".
	ServicePorts string
}

// Manifest is the Deployment and the Service as one multi-document YAML.
func (a App) Manifest() string {
	if a.Replicas == 0 {
		a.Replicas = 2
	}
	return fmt.Sprintf(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s}
spec:
  replicas: %[2]d
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
%[3]s      containers:
      - name: echo
        image: %[4]s
        ports: [{name: http, containerPort: 8080}]
        readinessProbe:
          httpGet: {path: /ready, port: 8080}
          periodSeconds: 1
          failureThreshold: 1
---
apiVersion: v1
kind: Service
metadata: {name: %[1]s}
spec:
  selector: {app: %[1]s}
  ports:
  - {name: http, port: 80, targetPort: http}
%[5]s`, a.Name, a.Replicas, indent(a.PodSpec, "      "), Image, indent(a.ServicePorts, "  "))
}

// ClientPod is an idle httpecho pod labelled app=<name> to run probes from, on node ("" = anywhere).
func ClientPod(name, node string) string {
	sel := ""
	if node != "" {
		sel = "\n  nodeSelector: {kubernetes.io/hostname: " + node + "}"
	}
	return fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: %[1]s, labels: {app: %[1]s}}
spec:%[2]s
  containers:
  - name: echo
    image: %[3]s
`, name, sel, Image)
}

// OnNode is the PodSpec that pins pods to one node.
func OnNode(node string) string { return "nodeSelector: {kubernetes.io/hostname: " + node + "}" }

// Join puts manifests into one multi-document YAML.
func Join(docs ...string) string { return strings.Join(docs, "\n---\n") }

func indent(yaml, by string) string {
	if strings.TrimSpace(yaml) == "" {
		return ""
	}
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(yaml, "\n"), "\n") {
		b.WriteString(by + l + "\n")
	}
	return b.String()
}
