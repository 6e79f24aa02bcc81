package validation

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The persistent volume sources Skiff's kubelet can mount: directories on the node. Any other
// is refused, never accepted and then left unmountable.
var supportedPVSources = []string{"hostPath", "local"}

// Access modes a node-local directory can honour: one node at a time. ReadWriteMany and
// ReadOnlyMany would promise sharing across nodes that a directory on one node cannot give;
// ReadWriteOncePod one pod at a time, which the scheduler does not enforce.
var supportedAccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}

// PersistentVolume validates a PersistentVolume as Kubernetes does, restricted to what Skiff
// can mount: hostPath and local sources, Filesystem mode, Retain or Delete.
func PersistentVolume(pv *corev1.PersistentVolume) field.ErrorList {
	errs := objectMeta(&pv.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
	s := &pv.Spec
	errs = append(errs, accessModes(s.AccessModes, specPath.Child("accessModes"))...)
	if len(s.Capacity) == 0 {
		errs = append(errs, field.Required(specPath.Child("capacity"), ""))
	}
	for name, q := range s.Capacity {
		if name != corev1.ResourceStorage {
			errs = append(errs, field.NotSupported(specPath.Child("capacity"), name, []string{string(corev1.ResourceStorage)}))
			continue
		}
		errs = append(errs, positiveQuantity(q, specPath.Child("capacity").Key(string(name)))...)
	}
	errs = append(errs, oneOf(s.PersistentVolumeReclaimPolicy, specPath.Child("persistentVolumeReclaimPolicy"),
		corev1.PersistentVolumeReclaimRetain, corev1.PersistentVolumeReclaimDelete)...)
	if s.StorageClassName != "" {
		errs = append(errs, dnsSubdomain(s.StorageClassName, specPath.Child("storageClassName"))...)
	}
	errs = append(errs, volumeMode(s.VolumeMode, specPath.Child("volumeMode"))...)
	if len(s.MountOptions) > 0 {
		errs = append(errs, field.Forbidden(specPath.Child("mountOptions"), "may not specify mount options for this volume type"))
	}
	errs = append(errs, pvSource(pv)...)
	return errs
}

// pvSource checks that exactly one supported source is set and its path.
func pvSource(pv *corev1.PersistentVolume) field.ErrorList {
	var errs field.ErrorList
	set := setFields(pv.Spec.PersistentVolumeSource)
	if len(set) == 0 {
		return field.ErrorList{field.Required(specPath, "must specify a volume type")}
	}
	if len(set) > 1 {
		errs = append(errs, field.Forbidden(specPath.Child(set[1]), "may not specify more than 1 volume type"))
	}
	for _, name := range set {
		if !contains(supportedPVSources, name) {
			errs = append(errs, field.NotSupported(specPath.Child(name), name, supportedPVSources))
		}
	}
	na := pv.Spec.NodeAffinity
	switch s := &pv.Spec.PersistentVolumeSource; {
	case s.HostPath != nil:
		errs = append(errs, absolutePath(s.HostPath.Path, specPath.Child("hostPath", "path"))...)
		if t := s.HostPath.Type; t != nil {
			errs = append(errs, oneOf(*t, specPath.Child("hostPath", "type"), corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory)...)
		}
	case s.Local != nil:
		errs = append(errs, absolutePath(s.Local.Path, specPath.Child("local", "path"))...)
		if na == nil {
			errs = append(errs, field.Required(specPath.Child("nodeAffinity"), "Local volume requires node affinity"))
		}
		if s.Local.FSType != nil && *s.Local.FSType != "" {
			errs = append(errs, field.Forbidden(specPath.Child("local", "fsType"), "a local directory has no file system type to choose"))
		}
	}
	if na != nil {
		errs = append(errs, volumeNodeAffinity(na, specPath.Child("nodeAffinity"))...)
	}
	return errs
}

func absolutePath(p string, fp *field.Path) field.ErrorList {
	switch {
	case p == "":
		return field.ErrorList{field.Required(fp, "")}
	case !strings.HasPrefix(p, "/"):
		return field.ErrorList{field.Invalid(fp, p, "must be an absolute path")}
	}
	for _, e := range strings.Split(p, "/") {
		if e == ".." {
			return field.ErrorList{field.Invalid(fp, p, "must not contain '..'")}
		}
	}
	return nil
}

// volumeNodeAffinity: a required node selector with at least one term, each term valid.
func volumeNodeAffinity(na *corev1.VolumeNodeAffinity, p *field.Path) field.ErrorList {
	if na.Required == nil {
		return field.ErrorList{field.Required(p.Child("required"), "must specify required node constraints")}
	}
	rp := p.Child("required", "nodeSelectorTerms")
	if len(na.Required.NodeSelectorTerms) == 0 {
		return field.ErrorList{field.Required(rp, "must have at least one node selector term")}
	}
	var errs field.ErrorList
	for i, t := range na.Required.NodeSelectorTerms {
		tp := rp.Index(i)
		if len(t.MatchExpressions)+len(t.MatchFields) == 0 {
			errs = append(errs, field.Required(tp, "must have at least one node selector requirement"))
		}
		for j, r := range t.MatchExpressions {
			ep := tp.Child("matchExpressions").Index(j)
			errs = append(errs, labelKey(r.Key, ep.Child("key"))...)
			errs = append(errs, nodeSelectorOperator(r, ep)...)
		}
		for j, r := range t.MatchFields {
			fp := tp.Child("matchFields").Index(j)
			if r.Key != "metadata.name" {
				errs = append(errs, field.NotSupported(fp.Child("key"), r.Key, []string{"metadata.name"}))
			}
			errs = append(errs, nodeSelectorOperator(r, fp)...)
		}
	}
	return errs
}

func nodeSelectorOperator(r corev1.NodeSelectorRequirement, p *field.Path) field.ErrorList {
	switch r.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(r.Values) == 0 {
			return field.ErrorList{field.Required(p.Child("values"), "must be specified when `operator` is 'In' or 'NotIn'")}
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(r.Values) > 0 {
			return field.ErrorList{field.Forbidden(p.Child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")}
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(r.Values) != 1 {
			return field.ErrorList{field.Required(p.Child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'")}
		}
	default:
		return oneOf(r.Operator, p.Child("operator"), corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists,
			corev1.NodeSelectorOpDoesNotExist, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt)
	}
	return nil
}

// accessModes: at least one, each one a node-local directory can honour.
func accessModes(modes []corev1.PersistentVolumeAccessMode, p *field.Path) field.ErrorList {
	if len(modes) == 0 {
		return field.ErrorList{field.Required(p, "at least 1 access mode is required")}
	}
	var errs field.ErrorList
	for _, m := range modes {
		errs = append(errs, oneOf(m, p, supportedAccessModes...)...)
	}
	return errs
}

func positiveQuantity(q resource.Quantity, p *field.Path) field.ErrorList {
	if q.Sign() <= 0 {
		return field.ErrorList{field.Invalid(p, q.String(), "must be greater than zero")}
	}
	return nil
}

// volumeMode: Filesystem only (a raw block device is not something a directory can be).
func volumeMode(m *corev1.PersistentVolumeMode, p *field.Path) field.ErrorList {
	if m == nil {
		return nil
	}
	return oneOf(*m, p, corev1.PersistentVolumeFilesystem)
}

// PersistentVolumeClaim validates a claim as Kubernetes does; data sources (cloning,
// snapshots) are refused, as no Skiff provisioner can fill a volume from one.
func PersistentVolumeClaim(pvc *corev1.PersistentVolumeClaim) field.ErrorList {
	errs := objectMeta(&pvc.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	return append(errs, claimSpec(&pvc.Spec, specPath)...)
}

// claimSpec validates a claim's spec at p: a claim's own spec, or a StatefulSet's claim template.
func claimSpec(s *corev1.PersistentVolumeClaimSpec, p *field.Path) field.ErrorList {
	errs := accessModes(s.AccessModes, p.Child("accessModes"))
	rp := p.Child("resources", "requests").Key(string(corev1.ResourceStorage))
	if q, ok := s.Resources.Requests[corev1.ResourceStorage]; !ok {
		errs = append(errs, field.Required(rp, ""))
	} else {
		errs = append(errs, positiveQuantity(q, rp)...)
	}
	if q, ok := s.Resources.Limits[corev1.ResourceStorage]; ok {
		errs = append(errs, positiveQuantity(q, p.Child("resources", "limits").Key(string(corev1.ResourceStorage)))...)
	}
	if s.StorageClassName != nil && *s.StorageClassName != "" {
		errs = append(errs, dnsSubdomain(*s.StorageClassName, p.Child("storageClassName"))...)
	}
	if s.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(s.Selector, metav1validation.LabelSelectorValidationOptions{}, p.Child("selector"))...)
	}
	errs = append(errs, volumeMode(s.VolumeMode, p.Child("volumeMode"))...)
	errs = append(errs, forbidSet(p, "volume data sources are not supported by Skiff's provisioner",
		optionalField{"dataSource", s.DataSource != nil}, optionalField{"dataSourceRef", s.DataSourceRef != nil})...)
	return append(errs, forbidSet(p, "volume attributes classes are not supported",
		optionalField{"volumeAttributesClassName", s.VolumeAttributesClassName != nil})...)
}

// persistentVolumeUpdate: the source and a set node affinity are immutable, as in Kubernetes.
func persistentVolumeUpdate(n, o *corev1.PersistentVolume) field.ErrorList {
	errs := metaUpdate(&n.ObjectMeta, &o.ObjectMeta)
	if !equality.Semantic.DeepEqual(n.Spec.PersistentVolumeSource, o.Spec.PersistentVolumeSource) {
		errs = append(errs, field.Forbidden(specPath.Child("persistentvolumesource"), "spec.persistentvolumesource is immutable after creation"))
	}
	if o.Spec.NodeAffinity != nil {
		errs = append(errs, immutable(n.Spec.NodeAffinity, o.Spec.NodeAffinity, specPath.Child("nodeAffinity"))...)
	}
	return errs
}

// persistentVolumeClaimUpdate: the spec is immutable but for binding (volumeName set once);
// resizing is refused, as no Skiff volume can be expanded.
func persistentVolumeClaimUpdate(n, o *corev1.PersistentVolumeClaim) field.ErrorList {
	errs := metaUpdate(&n.ObjectMeta, &o.ObjectMeta)
	cmp := n.Spec.DeepCopy()
	if o.Spec.VolumeName == "" {
		cmp.VolumeName = ""
	}
	if !equality.Semantic.DeepEqual(*cmp, o.Spec) {
		errs = append(errs, field.Forbidden(specPath, "spec is immutable after creation except volumeName when unset (Skiff's volumes cannot be expanded)"))
	}
	return errs
}

// StorageClass validates a class as Kubernetes does.
func StorageClass(sc *storagev1.StorageClass) field.ErrorList {
	errs := objectMeta(&sc.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
	if sc.Provisioner == "" {
		errs = append(errs, field.Required(field.NewPath("provisioner"), ""))
	} else {
		errs = append(errs, messages(field.NewPath("provisioner"), sc.Provisioner, validation.IsQualifiedName(strings.ToLower(sc.Provisioner)))...)
	}
	if sc.ReclaimPolicy != nil {
		errs = append(errs, oneOf(*sc.ReclaimPolicy, field.NewPath("reclaimPolicy"), corev1.PersistentVolumeReclaimRetain, corev1.PersistentVolumeReclaimDelete)...)
	}
	if sc.VolumeBindingMode != nil {
		errs = append(errs, oneOf(*sc.VolumeBindingMode, field.NewPath("volumeBindingMode"), storagev1.VolumeBindingImmediate, storagev1.VolumeBindingWaitForFirstConsumer)...)
	}
	if len(sc.Parameters) > 512 {
		errs = append(errs, field.TooMany(field.NewPath("parameters"), len(sc.Parameters), 512))
	}
	for k := range sc.Parameters {
		if k == "" {
			errs = append(errs, field.Invalid(field.NewPath("parameters"), k, "key must not be empty"))
		}
	}
	if sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion {
		errs = append(errs, field.Forbidden(field.NewPath("allowVolumeExpansion"), "Skiff's volumes cannot be expanded"))
	}
	return errs
}

// storageClassUpdate: parameters, provisioner, reclaim policy and binding mode are immutable.
func storageClassUpdate(n, o *storagev1.StorageClass) field.ErrorList {
	errs := metaUpdate(&n.ObjectMeta, &o.ObjectMeta)
	if !equality.Semantic.DeepEqual(n.Parameters, o.Parameters) {
		errs = append(errs, field.Forbidden(field.NewPath("parameters"), "updates to parameters are forbidden."))
	}
	if n.Provisioner != o.Provisioner {
		errs = append(errs, field.Forbidden(field.NewPath("provisioner"), "updates to provisioner are forbidden."))
	}
	if !equality.Semantic.DeepEqual(n.ReclaimPolicy, o.ReclaimPolicy) {
		errs = append(errs, field.Forbidden(field.NewPath("reclaimPolicy"), "updates to reclaimPolicy are forbidden."))
	}
	errs = append(errs, immutable(n.VolumeBindingMode, o.VolumeBindingMode, field.NewPath("volumeBindingMode"))...)
	return errs
}
