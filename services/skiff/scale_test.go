package main

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// `skiff scale` takes the object as kubectl does, "deploy/web" or "deployment web", and
// refuses an argument that names no object.
func TestScaleAcceptsKubectlObjectForms(t *testing.T) {
	cp := testutil.StartControlPlane(t, func(c *controlplane.Config) { c.Components = []string{"apiserver"} })
	one := int32(1)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}
	dep.Spec.Template.Labels = map[string]string{"app": "web"}
	dep.Spec.Template.Spec.Containers = []corev1.Container{{Name: "web", Image: "web:1"}}
	if _, err := cp.Client.Create(context.Background(), dep); err != nil {
		t.Fatal(err)
	}
	for args, want := range map[string]int32{"deploy/web --replicas=3": 3, "deployment web --replicas 5": 5} {
		out, err := runCLI(t, cp.URL(), append([]string{"scale"}, strings.Fields(args)...)...)
		if err != nil || !strings.Contains(out, "deployment.apps/web scaled") {
			t.Fatalf("scale %s: %v %q", args, err, out)
		}
		got, err := cp.Client.Get(context.Background(), deploymentKind(), "default", "web")
		if err != nil {
			t.Fatal(err)
		}
		if r := *got.(*appsv1.Deployment).Spec.Replicas; r != want {
			t.Fatalf("scale %s: replicas %d, want %d", args, r, want)
		}
	}
	for _, bad := range []string{"deploy", "deploy/", "deploy/web extra", "nosuchtype/web"} {
		if out, err := runCLI(t, cp.URL(), append([]string{"scale", "--replicas=2"}, strings.Fields(bad)...)...); err == nil {
			t.Fatalf("scale %s accepted: %q", bad, out)
		}
	}
}
