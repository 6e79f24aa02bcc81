package validation

import (
	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// StatefulSet validates a StatefulSet as kube-apiserver does: its name is a DNS label, since
// each pod's hostname is <name>-<ordinal>. volumeClaimTemplates are refused:
// PersistentVolumeClaims are not served, and a set accepted with claims its pods never get
// would run without the storage it asked for.
func StatefulSet(s *appsv1.StatefulSet) field.ErrorList {
	errs := objectMeta(&s.ObjectMeta, true, apivalidation.NameIsDNSLabel)
	sp := &s.Spec
	errs = append(errs, replicas(sp.Replicas)...)
	errs = append(errs, workloadTemplate(sp.Selector, &sp.Template, "statefulset")...)
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
	if len(sp.VolumeClaimTemplates) > 0 {
		errs = append(errs, field.Forbidden(specPath.Child("volumeClaimTemplates"),
			"persistentvolumeclaims are not served yet, so a StatefulSet's pods cannot get their claims"))
	}
	return errs
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
	if !apiequality.Semantic.DeepEqual(mutable, &n.Spec) {
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
