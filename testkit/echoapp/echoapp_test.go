package echoapp

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/schemas"
)

// The manifests decode strictly as the API would take them, with the placement and ports given.
func TestManifestsDecode(t *testing.T) {
	app := App{Name: "web", Replicas: 3, PodSpec: OnNode("n1") + "\ntolerations:\n- {operator: Exists}",
		ServicePorts: "- {name: dns, port: 53, targetPort: 8080, protocol: UDP}"}
	docs, err := schemas.DecodeManifests([]byte(Join(app.Manifest(), ClientPod("c", "n2"))))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 3 {
		t.Fatalf("%d documents, want 3", len(docs))
	}
	d := docs[0].Object.(*appsv1.Deployment)
	ps := d.Spec.Template.Spec
	if *d.Spec.Replicas != 3 || ps.NodeSelector["kubernetes.io/hostname"] != "n1" || len(ps.Tolerations) != 1 || ps.Containers[0].Image != Image {
		t.Fatalf("deployment %+v", d.Spec)
	}
	if s := docs[1].Object.(*corev1.Service); len(s.Spec.Ports) != 2 || s.Spec.Ports[1].Protocol != corev1.ProtocolUDP {
		t.Fatalf("service ports %+v", s.Spec.Ports)
	}
	if p := docs[2].Object.(*corev1.Pod); p.Spec.NodeSelector["kubernetes.io/hostname"] != "n2" || p.Labels["app"] != "c" {
		t.Fatalf("client pod %+v", p)
	}
	if docs, err := schemas.DecodeManifests([]byte(Join(App{Name: "plain"}.Manifest(), ClientPod("any", "")))); err != nil || len(docs) != 3 {
		t.Fatalf("plain app: %d docs, %v", len(docs), err)
	}
}
