package validation_test

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skiff-sh/skiff/schemas/defaults"
	"github.com/skiff-sh/skiff/schemas/validation"
)

func statefulSet() *appsv1.StatefulSet {
	d := deployment()
	return &appsv1.StatefulSet{ObjectMeta: meta("web"), Spec: appsv1.StatefulSetSpec{
		ServiceName: "web", Selector: d.Spec.Selector, Template: d.Spec.Template,
	}}
}

func TestStatefulSetDefaults(t *testing.T) {
	s := statefulSet()
	defaults.Default(s)
	sp := s.Spec
	ru := sp.UpdateStrategy.RollingUpdate
	if *sp.Replicas != 1 || sp.PodManagementPolicy != appsv1.OrderedReadyPodManagement ||
		sp.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType || ru == nil || *ru.Partition != 0 ||
		ru.MaxUnavailable.String() != "1" || *sp.RevisionHistoryLimit != 10 ||
		sp.PersistentVolumeClaimRetentionPolicy.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType ||
		sp.PersistentVolumeClaimRetentionPolicy.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType ||
		sp.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Fatalf("defaults: %+v", sp)
	}
	ondelete := statefulSet()
	ondelete.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType
	defaults.Default(ondelete)
	if ondelete.Spec.UpdateStrategy.RollingUpdate != nil {
		t.Fatalf("OnDelete got a rollingUpdate: %+v", ondelete.Spec.UpdateStrategy)
	}
	check(t, "defaulted", statefulSet(), "", "")
	check(t, "ondelete", ondelete, "", "")
}

func claimTemplate(name string) corev1.PersistentVolumeClaim {
	return corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, Resources: storageRequest("1Gi")}}
}

func storageRequest(q string) corev1.VolumeResourceRequirements {
	return corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(q)}}
}

// A set with claim templates is valid, its containers may mount them, and one named like a
// pod volume is no error: the claim replaces it.
func TestStatefulSetClaimTemplates(t *testing.T) {
	s := statefulSet()
	s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{claimTemplate("data"), claimTemplate("scratch")}
	s.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	s.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "scratch", MountPath: "/scratch"}}
	s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType}
	defaults.Default(s)
	check(t, "claim templates", s, "", "")
}

func TestStatefulSetInvalid(t *testing.T) {
	cases := []struct {
		name, path, want string
		edit             func(*appsv1.StatefulSet)
	}{
		{"dotted name", "metadata.name", "must not contain dots", func(s *appsv1.StatefulSet) { s.Name = "web.v1" }},
		{"negative replicas", "spec.replicas", "must be greater than or equal to 0", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr(int32(-1)) }},
		{"selector mismatch", "spec.template.metadata.labels", "`selector` does not match template `labels`", func(s *appsv1.StatefulSet) {
			s.Spec.Template.Labels = map[string]string{"app": "other"}
		}},
		{"no selector", "spec.selector", "Required", func(s *appsv1.StatefulSet) { s.Spec.Selector = nil }},
		{"policy", "spec.podManagementPolicy", "Unsupported value", func(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = "Random" }},
		{"strategy", "spec.updateStrategy.type", "Unsupported value", func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.Type = "Recreate" }},
		{"partition", "spec.updateStrategy.rollingUpdate.partition", "must be greater than or equal to 0", func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr(int32(-2))}
		}},
		{"maxUnavailable 0", "spec.updateStrategy.rollingUpdate.maxUnavailable", "must be greater than 0", func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptr(intstr.FromInt32(0))}
		}},
		{"maxUnavailable 150%", "spec.updateStrategy.rollingUpdate.maxUnavailable", "100%", func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptr(intstr.FromString("150%"))}
		}},
		{"rollingUpdate with OnDelete", "spec.updateStrategy.rollingUpdate", "only allowed for updateStrategy 'RollingUpdate'", func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType, RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{}}
		}},
		{"ordinals", "spec.ordinals.start", "must be greater than or equal to 0", func(s *appsv1.StatefulSet) {
			s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: -1}
		}},
		{"service name", "spec.serviceName", "RFC 1123 label", func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "Web_1" }},
		{"retention", "spec.persistentVolumeClaimRetentionPolicy.whenScaled", "Unsupported value", func(s *appsv1.StatefulSet) {
			s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenScaled: "Keep"}
		}},
		{"restart policy", "spec.template.spec.restartPolicy", "Unsupported value", func(s *appsv1.StatefulSet) {
			s.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		}},
		{"claim access modes", "spec.volumeClaimTemplates[0].spec.accessModes", "Required", func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{Resources: storageRequest("1Gi")}}}
		}},
		{"claim size", "spec.volumeClaimTemplates[1].spec.resources.requests[storage]", "Required", func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{claimTemplate("data"), claimTemplate("logs")}
			s.Spec.VolumeClaimTemplates[1].Spec.Resources = corev1.VolumeResourceRequirements{}
		}},
		{"claim name", "spec.volumeClaimTemplates[0].metadata.name", "Required", func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{claimTemplate("")}
		}},
		{"mount of no volume nor claim", "spec.template.spec.containers[0].volumeMounts[0].name", "Not found", func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{claimTemplate("data")}
			s.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "logs", MountPath: "/logs"}}
		}},
		{"claim name label", "spec.volumeClaimTemplates[0].metadata.name", "RFC 1123 label", func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{claimTemplate("Data")}
		}},
	}
	for _, c := range cases {
		s := statefulSet()
		c.edit(s)
		check(t, c.name, s, c.path, c.want)
	}
}

func TestStatefulSetUpdate(t *testing.T) {
	old := statefulSet()
	defaults.Default(old)
	old.ResourceVersion = "1"
	mutable := old.DeepCopy()
	mutable.Spec.Replicas = ptr(int32(5))
	mutable.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
	mutable.Spec.UpdateStrategy.RollingUpdate.Partition = ptr(int32(2))
	mutable.Spec.MinReadySeconds = 3
	mutable.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 1}
	if errs := validation.ValidateUpdate(mutable, old); len(errs) > 0 {
		t.Fatalf("mutable fields refused: %v", errs)
	}
	for name, edit := range map[string]func(*appsv1.StatefulSet){
		"serviceName": func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "other" },
		"policy":      func(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement },
		"selector": func(s *appsv1.StatefulSet) {
			s.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "tier": "x"}}
			s.Spec.Template.Labels["tier"] = "x"
		},
	} {
		next := old.DeepCopy()
		edit(next)
		errs := validation.ValidateUpdate(next, old)
		if len(errs) != 1 || errs[0].Field != "spec" || !strings.Contains(errs[0].Error(), "Forbidden: updates to statefulset spec for fields other than") {
			t.Errorf("%s: %v", name, errs)
		}
	}
}

func TestControllerRevision(t *testing.T) {
	r := &appsv1.ControllerRevision{ObjectMeta: meta("web-abc"), Revision: 1, Data: runtime.RawExtension{Raw: []byte(`{"spec":{}}`)}}
	check(t, "revision", r, "", "")
	check(t, "no data", &appsv1.ControllerRevision{ObjectMeta: meta("web-abc")}, "data", "data is mandatory")
	check(t, "negative", &appsv1.ControllerRevision{ObjectMeta: meta("web-abc"), Revision: -1, Data: r.Data}, "revision", "must be greater than or equal to 0")
	r.ResourceVersion = "1"
	next := r.DeepCopy()
	next.Revision = 2
	if errs := validation.ValidateUpdate(next, r); len(errs) > 0 {
		t.Fatalf("revision number change refused: %v", errs)
	}
	next.Data.Raw = []byte(`{"spec":{"x":1}}`)
	if errs := validation.ValidateUpdate(next, r); len(errs) != 1 || errs[0].Field != "data" {
		t.Fatalf("data change: %v", errs)
	}
}
