package validation

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// StatefulSet validates a StatefulSet as kube-apiserver does: its name is a DNS label, since
// each pod's hostname is <name>-<ordinal>; each volumeClaimTemplate must make a valid claim
// (claimTemplate).
func StatefulSet(s *appsv1.StatefulSet) field.ErrorList {
	errs := objectMeta(&s.ObjectMeta, true, apivalidation.NameIsDNSLabel)
	sp := &s.Spec
	errs = append(errs, replicas(sp.Replicas)...)
	errs = append(errs, workloadTemplate(sp.Selector, withClaimVolumes(sp), "statefulset")...)
	errs = append(errs, nonNegative(int64(sp.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	if sp.RevisionHistoryLimit != nil {
		errs = append(errs, nonNegative(int64(*sp.RevisionHistoryLimit), specPath.Child("revisionHistoryLimit"))...)
	}
	if sp.Ordinals != nil {
		errs = append(errs, nonNegative(int64(sp.Ordinals.Start), specPath.Child("ordinals", "start"))...)
	}
	if sp.ServiceName != "" {
		errs = append(errs, dnsLabel(sp.ServiceName, specPath.Child("serviceName"))...)
	}
	errs = append(errs, oneOf(sp.PodManagementPolicy, specPath.Child("podManagementPolicy"),
		appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement)...)
	errs = append(errs, statefulSetStrategy(&sp.UpdateStrategy)...)
	if rp := sp.PersistentVolumeClaimRetentionPolicy; rp != nil {
		pp := specPath.Child("persistentVolumeClaimRetentionPolicy")
		errs = append(errs, oneOf(rp.WhenDeleted, pp.Child("whenDeleted"),
			appsv1.RetainPersistentVolumeClaimRetentionPolicyType, appsv1.DeletePersistentVolumeClaimRetentionPolicyType)...)
		errs = append(errs, oneOf(rp.WhenScaled, pp.Child("whenScaled"),
			appsv1.RetainPersistentVolumeClaimRetentionPolicyType, appsv1.DeletePersistentVolumeClaimRetentionPolicyType)...)
	}
	for i := range sp.VolumeClaimTemplates {
		errs = append(errs, claimTemplate(&sp.VolumeClaimTemplates[i], specPath.Child("volumeClaimTemplates").Index(i))...)
	}
	return errs
}

// withClaimVolumes is the pod template as the set's pods get it: with a volume per claim
// template (claim-named ones replace the template's), so containers may mount the claims.
func withClaimVolumes(sp *appsv1.StatefulSetSpec) *corev1.PodTemplateSpec {
	if len(sp.VolumeClaimTemplates) == 0 {
		return &sp.Template
	}
	t := sp.Template.DeepCopy()
	for _, c := range sp.VolumeClaimTemplates {
		v := corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name}}}
		if i := slices.IndexFunc(t.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == c.Name }); i >= 0 {
			t.Spec.Volumes[i] = v
		} else if c.Name != "" {
			t.Spec.Volumes = append(t.Spec.Volumes, v)
		}
	}
	return t
}

// claimTemplate: the spec is a claim's (claimSpec), and the name, which names both the pods'
// volume and, as <name>-<set>-<ordinal>, their claims, is a DNS label. A template named like
// a volume of the pod template is no error: as in Kubernetes, the claim replaces that volume.
func claimTemplate(t *corev1.PersistentVolumeClaim, p *field.Path) field.ErrorList {
	np := p.Child("metadata", "name")
	var errs field.ErrorList
	if t.Name == "" {
		errs = append(errs, field.Required(np, ""))
	} else {
		errs = append(errs, dnsLabel(t.Name, np)...)
	}
	return append(errs, claimSpec(&t.Spec, p.Child("spec"))...)
}

func statefulSetStrategy(st *appsv1.StatefulSetUpdateStrategy) field.ErrorList {
	up := specPath.Child("updateStrategy")
	errs := oneOf(st.Type, up.Child("type"), appsv1.RollingUpdateStatefulSetStrategyType, appsv1.OnDeleteStatefulSetStrategyType)
	ru := st.RollingUpdate
	if ru == nil {
		return errs
	}
	rp := up.Child("rollingUpdate")
	if st.Type != appsv1.RollingUpdateStatefulSetStrategyType {
		return append(errs, field.Invalid(rp, ru, "only allowed for updateStrategy 'RollingUpdate'"))
	}
	if ru.Partition != nil {
		errs = append(errs, nonNegative(int64(*ru.Partition), rp.Child("partition"))...)
	}
	if ru.MaxUnavailable != nil {
		mp := rp.Child("maxUnavailable")
		errs = append(errs, intOrPercent(ru.MaxUnavailable, mp, true)...)
		if isZero(ru.MaxUnavailable) {
			errs = append(errs, field.Invalid(mp, ru.MaxUnavailable.String(), "must be greater than 0"))
		}
	}
	return errs
}

// statefulSetUpdate refuses changes to the spec beyond what kube-apiserver lets change.
func statefulSetUpdate(n, o *appsv1.StatefulSet) field.ErrorList {
	errs := metaUpdate(&n.ObjectMeta, &o.ObjectMeta)
	mutable := o.Spec.DeepCopy()
	mutable.Replicas = n.Spec.Replicas
	mutable.Ordinals = n.Spec.Ordinals
	mutable.Template = n.Spec.Template
	mutable.UpdateStrategy = n.Spec.UpdateStrategy
	mutable.RevisionHistoryLimit = n.Spec.RevisionHistoryLimit
	mutable.PersistentVolumeClaimRetentionPolicy = n.Spec.PersistentVolumeClaimRetentionPolicy
	mutable.MinReadySeconds = n.Spec.MinReadySeconds
	if !semanticallyEqual(mutable, &n.Spec) {
		errs = append(errs, field.Forbidden(specPath, "updates to statefulset spec for fields other than 'replicas', 'ordinals', "+
			"'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"))
	}
	return errs
}

// ControllerRevision validates a ControllerRevision: data is required and the revision
// non-negative; data never changes (controllerRevisionUpdate).
func ControllerRevision(r *appsv1.ControllerRevision) field.ErrorList {
	errs := objectMeta(&r.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	if r.Data.Raw == nil && r.Data.Object == nil {
		errs = append(errs, field.Required(field.NewPath("data"), "data is mandatory"))
	}
	return append(errs, nonNegative(r.Revision, field.NewPath("revision"))...)
}

func controllerRevisionUpdate(n, o *appsv1.ControllerRevision) field.ErrorList {
	errs := metaUpdate(&n.ObjectMeta, &o.ObjectMeta)
	return append(errs, immutable(n.Data, o.Data, field.NewPath("data"))...)
}
