package deployment

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/schemas"
)

// The apiserver defaults a Deployment's template and, separately, the ReplicaSet made from it:
// both must still compare equal, or every sync would think the template changed.
func TestTemplateSurvivesDefaulting(t *testing.T) {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}},
			},
		},
	}
	schemas.Default(d)
	tmpl := d.Spec.Template.DeepCopy()
	tmpl.Labels[HashLabel] = ComputeHash(&d.Spec.Template, nil)
	rs := &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(1)), Selector: d.Spec.Selector, Template: *tmpl}}
	schemas.Default(rs)
	if !equalIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
		t.Fatalf("templates differ after defaulting:\n%+v\n%+v", rs.Spec.Template, d.Spec.Template)
	}
	if ComputeHash(&d.Spec.Template, nil) == ComputeHash(&d.Spec.Template, ptr.To(int32(1))) {
		t.Fatal("the collision count must change the hash")
	}
}
