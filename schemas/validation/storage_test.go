package validation_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/schemas/defaults"
	"github.com/skiff-sh/skiff/schemas/validation"
)

func storage(q string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(q)}
}

func pv() *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"}, Spec: corev1.PersistentVolumeSpec{
		Capacity: storage("1Gi"), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/data"}},
	}}
}

func pvc() *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: meta("data"), Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: storage("1Gi")},
	}}
}

func TestPersistentVolumeRules(t *testing.T) {
	cases := []struct {
		name, path, want string
		mut              func(*corev1.PersistentVolume)
	}{
		{"valid", "", "", func(*corev1.PersistentVolume) {}},
		{"no access modes", "spec.accessModes", "Required value", func(p *corev1.PersistentVolume) { p.Spec.AccessModes = nil }},
		{"RWX refused", "spec.accessModes", `Unsupported value: "ReadWriteMany"`, func(p *corev1.PersistentVolume) {
			p.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
		}},
		{"RWOP refused", "spec.accessModes", `Unsupported value: "ReadWriteOncePod": supported values: "ReadWriteOnce"`, func(p *corev1.PersistentVolume) {
			p.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteOncePod}
		}},
		{"no capacity", "spec.capacity", "Required value", func(p *corev1.PersistentVolume) { p.Spec.Capacity = nil }},
		{"zero capacity", "spec.capacity[storage]", "must be greater than zero", func(p *corev1.PersistentVolume) { p.Spec.Capacity = storage("0") }},
		{"no source", "spec", "must specify a volume type", func(p *corev1.PersistentVolume) { p.Spec.HostPath = nil }},
		{"nfs refused", "spec.nfs", `Unsupported value: "nfs": supported values: "hostPath", "local"`, func(p *corev1.PersistentVolume) {
			p.Spec.HostPath, p.Spec.NFS = nil, &corev1.NFSVolumeSource{Server: "s", Path: "/x"}
		}},
		{"relative path", "spec.hostPath.path", "must be an absolute path", func(p *corev1.PersistentVolume) { p.Spec.HostPath.Path = "data" }},
		{"local needs affinity", "spec.nodeAffinity", "Local volume requires node affinity", func(p *corev1.PersistentVolume) {
			p.Spec.HostPath, p.Spec.Local = nil, &corev1.LocalVolumeSource{Path: "/srv/x"}
		}},
		{"affinity without required", "spec.nodeAffinity.required", "Required value", func(p *corev1.PersistentVolume) {
			p.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{}
		}},
		{"recycle refused", "spec.persistentVolumeReclaimPolicy", `Unsupported value: "Recycle"`, func(p *corev1.PersistentVolume) {
			p.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRecycle
		}},
		{"block refused", "spec.volumeMode", `Unsupported value: "Block"`, func(p *corev1.PersistentVolume) {
			b := corev1.PersistentVolumeBlock
			p.Spec.VolumeMode = &b
		}},
		{"mount options", "spec.mountOptions", "Forbidden", func(p *corev1.PersistentVolume) { p.Spec.MountOptions = []string{"ro"} }},
	}
	for _, c := range cases {
		p := pv()
		c.mut(p)
		check(t, c.name, p, c.path, c.want)
	}
	p := pv()
	defaults.Default(p)
	if p.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain || *p.Spec.VolumeMode != corev1.PersistentVolumeFilesystem || p.Status.Phase != corev1.VolumePending {
		t.Errorf("defaults: %+v %+v", p.Spec, p.Status)
	}
}

func TestPersistentVolumeClaimRules(t *testing.T) {
	cases := []struct {
		name, path, want string
		mut              func(*corev1.PersistentVolumeClaim)
	}{
		{"valid", "", "", func(*corev1.PersistentVolumeClaim) {}},
		{"no access modes", "spec.accessModes", "Required value", func(p *corev1.PersistentVolumeClaim) { p.Spec.AccessModes = nil }},
		{"no storage request", "spec.resources.requests[storage]", "Required value", func(p *corev1.PersistentVolumeClaim) { p.Spec.Resources.Requests = nil }},
		{"zero request", "spec.resources.requests[storage]", "must be greater than zero", func(p *corev1.PersistentVolumeClaim) { p.Spec.Resources.Requests = storage("0") }},
		{"bad class", "spec.storageClassName", "Invalid value", func(p *corev1.PersistentVolumeClaim) { p.Spec.StorageClassName = ptr("Bad_Class") }},
		{"data source", "spec.dataSource", "Forbidden", func(p *corev1.PersistentVolumeClaim) {
			p.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "x"}
		}},
	}
	for _, c := range cases {
		p := pvc()
		c.mut(p)
		check(t, c.name, p, c.path, c.want)
	}

	old := pvc()
	old.ResourceVersion = "1"
	defaults.Default(old)
	bind := old.DeepCopy()
	bind.Spec.VolumeName = "pv1"
	if errs := validation.ValidateUpdate(bind, old); len(errs) > 0 {
		t.Errorf("binding refused: %v", errs)
	}
	grow := bind.DeepCopy()
	grow.Spec.Resources.Requests = storage("2Gi")
	if errs := validation.ValidateUpdate(grow, bind); len(errs) != 1 || errs[0].Field != "spec" {
		t.Errorf("resize: %v", errs)
	}
	rebind := bind.DeepCopy()
	rebind.Spec.VolumeName = "pv2"
	if errs := validation.ValidateUpdate(rebind, bind); len(errs) != 1 {
		t.Errorf("rebind: %v", errs)
	}
}

func TestStorageClassRules(t *testing.T) {
	sc := func() *storagev1.StorageClass {
		return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, Provisioner: "skiff.io/local-path"}
	}
	check(t, "valid", sc(), "", "")
	noProv := sc()
	noProv.Provisioner = ""
	check(t, "no provisioner", noProv, "provisioner", "Required value")
	mode := sc()
	mode.VolumeBindingMode = ptr(storagev1.VolumeBindingMode("Later"))
	check(t, "binding mode", mode, "volumeBindingMode", `Unsupported value: "Later"`)

	old := sc()
	old.ResourceVersion = "1"
	defaults.Default(old)
	if *old.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete || *old.VolumeBindingMode != storagev1.VolumeBindingImmediate {
		t.Errorf("defaults: %v %v", *old.ReclaimPolicy, *old.VolumeBindingMode)
	}
	n := old.DeepCopy()
	n.Parameters = map[string]string{"a": "b"}
	errs := validation.ValidateUpdate(n, old)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "updates to parameters are forbidden") {
		t.Errorf("parameters update: %v", errs)
	}
}
