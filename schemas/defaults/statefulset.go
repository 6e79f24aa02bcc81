package defaults

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// StatefulSet defaults as kube-apiserver does with MaxUnavailableStatefulSet on: one replica,
// OrderedReady, a rolling update from partition 0 with one pod unavailable at a time, the
// history limit, claims retained on delete and scale-down, and the template's Pod spec.
func StatefulSet(s *appsv1.StatefulSet) {
	sp := &s.Spec
	if sp.Replicas == nil {
		sp.Replicas = ptr(int32(1))
	}
	if sp.PodManagementPolicy == "" {
		sp.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	st := &sp.UpdateStrategy
	if st.Type == "" {
		st.Type = appsv1.RollingUpdateStatefulSetStrategyType
	}
	if st.Type == appsv1.RollingUpdateStatefulSetStrategyType {
		if st.RollingUpdate == nil {
			st.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
		if st.RollingUpdate.Partition == nil {
			st.RollingUpdate.Partition = ptr(int32(0))
		}
		if st.RollingUpdate.MaxUnavailable == nil {
			st.RollingUpdate.MaxUnavailable = ptr(intstr.FromInt32(1))
		}
	}
	if sp.RevisionHistoryLimit == nil {
		sp.RevisionHistoryLimit = ptr(int32(defaultRevisionHistoryLimit))
	}
	if sp.PersistentVolumeClaimRetentionPolicy == nil {
		sp.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	rp := sp.PersistentVolumeClaimRetentionPolicy
	if rp.WhenDeleted == "" {
		rp.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if rp.WhenScaled == "" {
		rp.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	PodSpec(&sp.Template.Spec)
}
