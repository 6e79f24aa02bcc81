package printers

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/schemas/defaults"
)

// Kubernetes' columns for persistent volumes, claims and storage classes, described by the
// fields' own API documentation as kube's printers are.
func init() {
	pvSpec, pvStatus := corev1.PersistentVolumeSpec{}.SwaggerDoc(), corev1.PersistentVolumeStatus{}.SwaggerDoc()
	register("persistentvolumes", printer{
		columns: []metav1.TableColumnDefinition{nameColumn,
			col("Capacity", "string", pvSpec["capacity"]),
			col("Access Modes", "string", pvSpec["accessModes"]),
			col("Reclaim Policy", "string", pvSpec["persistentVolumeReclaimPolicy"]),
			col("Status", "string", pvStatus["phase"]),
			col("Claim", "string", pvSpec["claimRef"]),
			col("StorageClass", "string", "StorageClass of the pv"),
			col("VolumeAttributesClass", "string", "VolumeAttributesClass of the pv"),
			col("Reason", "string", pvStatus["reason"]),
			ageColumn,
			wide("VolumeMode", "string", pvSpec["volumeMode"]),
		},
		cells: typed(func(pv *corev1.PersistentVolume, now time.Time) []any {
			claim := ""
			if r := pv.Spec.ClaimRef; r != nil {
				claim = r.Namespace + "/" + r.Name
			}
			phase := phaseOrTerminating(string(pv.Status.Phase), pv.DeletionTimestamp)
			size := pv.Spec.Capacity[corev1.ResourceStorage]
			return []any{pv.Name, size.String(), AccessModes(pv.Spec.AccessModes), string(pv.Spec.PersistentVolumeReclaimPolicy), phase, claim,
				pv.Spec.StorageClassName, unset(pv.Spec.VolumeAttributesClassName), pv.Status.Reason, Age(pv.CreationTimestamp, now), volumeMode(pv.Spec.VolumeMode)}
		}),
	})
	pvcSpec, pvcStatus := corev1.PersistentVolumeClaimSpec{}.SwaggerDoc(), corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()
	register("persistentvolumeclaims", printer{
		columns: []metav1.TableColumnDefinition{nameColumn,
			col("Status", "string", pvcStatus["phase"]),
			col("Volume", "string", pvcSpec["volumeName"]),
			col("Capacity", "string", pvcStatus["capacity"]),
			col("Access Modes", "string", pvcStatus["accessModes"]),
			col("StorageClass", "string", "StorageClass of the pvc"),
			col("VolumeAttributesClass", "string", "VolumeAttributesClass of the pvc"),
			ageColumn,
			wide("VolumeMode", "string", pvcSpec["volumeMode"]),
		},
		cells: typed(func(pvc *corev1.PersistentVolumeClaim, now time.Time) []any {
			phase := phaseOrTerminating(string(pvc.Status.Phase), pvc.DeletionTimestamp)
			size, modes := "", ""
			if pvc.Spec.VolumeName != "" { // as kubectl: capacity and modes of a bound claim only
				q := pvc.Status.Capacity[corev1.ResourceStorage]
				size, modes = q.String(), AccessModes(pvc.Status.AccessModes)
			}
			class := ""
			if pvc.Spec.StorageClassName != nil {
				class = *pvc.Spec.StorageClassName
			}
			return []any{pvc.Name, phase, pvc.Spec.VolumeName, size, modes, class, unset(pvc.Spec.VolumeAttributesClassName),
				Age(pvc.CreationTimestamp, now), volumeMode(pvc.Spec.VolumeMode)}
		}),
	})
	sc := storagev1.StorageClass{}.SwaggerDoc()
	register("storageclasses", printer{
		columns: []metav1.TableColumnDefinition{nameColumn,
			col("Provisioner", "string", sc["provisioner"]),
			col("ReclaimPolicy", "string", sc["reclaimPolicy"]),
			col("VolumeBindingMode", "string", sc["volumeBindingMode"]),
			col("AllowVolumeExpansion", "string", sc["allowVolumeExpansion"]),
			ageColumn,
		},
		cells: typed(func(c *storagev1.StorageClass, now time.Time) []any {
			name := c.Name
			if defaults.IsDefaultClass(c) { // kubectl marks it
				name += " (default)"
			}
			reclaim, mode, expand := string(corev1.PersistentVolumeReclaimDelete), string(storagev1.VolumeBindingImmediate), false
			if c.ReclaimPolicy != nil {
				reclaim = string(*c.ReclaimPolicy)
			}
			if c.VolumeBindingMode != nil {
				mode = string(*c.VolumeBindingMode)
			}
			if c.AllowVolumeExpansion != nil {
				expand = *c.AllowVolumeExpansion
			}
			return []any{name, c.Provisioner, reclaim, mode, expand, Age(c.CreationTimestamp, now)}
		}),
	})
}

// AccessModes abbreviates access modes as kubectl does: "RWO,ROX,RWX,RWOP", in that order.
func AccessModes(modes []corev1.PersistentVolumeAccessMode) string {
	var out []string
	for _, m := range []struct {
		mode  corev1.PersistentVolumeAccessMode
		short string
	}{{corev1.ReadWriteOnce, "RWO"}, {corev1.ReadOnlyMany, "ROX"}, {corev1.ReadWriteMany, "RWX"}, {corev1.ReadWriteOncePod, "RWOP"}} {
		for _, have := range modes {
			if have == m.mode {
				out = append(out, m.short)
				break
			}
		}
	}
	return strings.Join(out, ",")
}

// phaseOrTerminating is the STATUS kubectl shows: Terminating once deletion started.
func phaseOrTerminating(phase string, deleting *metav1.Time) string {
	if deleting != nil {
		return "Terminating"
	}
	return phase
}

func unset(s *string) string {
	if s == nil || *s == "" {
		return "<unset>"
	}
	return *s
}

func volumeMode(m *corev1.PersistentVolumeMode) string {
	if m == nil {
		return "<unset>"
	}
	return string(*m)
}
