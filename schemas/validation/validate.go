// Package validation checks objects the way the Kubernetes apiserver does for the kinds Skiff
// serves, naming fields by their JSON paths ("spec.template.spec.containers[0].image").
// Kubernetes' own validation lives in k8s.io/kubernetes, which is not importable, so the
// kind-specific rules are written here on top of apimachinery's generic helpers.
package validation

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks a new object (after defaulting). An unknown type is an internal error.
func Validate(obj runtime.Object) field.ErrorList {
	switch o := obj.(type) {
	case *corev1.Pod:
		return Pod(o)
	case *corev1.Service:
		return Service(o)
	case *corev1.Namespace:
		return Namespace(o)
	case *corev1.Node:
		return Node(o)
	case *corev1.Event:
		return Event(o)
	case *corev1.ConfigMap:
		return ConfigMap(o)
	case *corev1.Secret:
		return Secret(o)
	case *corev1.ServiceAccount:
		return ServiceAccount(o)
	case *corev1.PersistentVolume:
		return PersistentVolume(o)
	case *corev1.PersistentVolumeClaim:
		return PersistentVolumeClaim(o)
	case *storagev1.StorageClass:
		return StorageClass(o)
	case *networkingv1.NetworkPolicy:
		return NetworkPolicy(o)
	case *appsv1.Deployment:
		return Deployment(o)
	case *appsv1.ReplicaSet:
		return ReplicaSet(o)
	case *appsv1.DaemonSet:
		return DaemonSet(o)
	case *appsv1.StatefulSet:
		return StatefulSet(o)
	case *appsv1.ControllerRevision:
		return ControllerRevision(o)
	case *batchv1.Job:
		return Job(o)
	case *batchv1.CronJob:
		return CronJob(o)
	case *autoscalingv2.HorizontalPodAutoscaler:
		return HorizontalPodAutoscaler(o)
	case *autoscalingv1.HorizontalPodAutoscaler:
		return HorizontalPodAutoscalerV1(o)
	case *discoveryv1.EndpointSlice:
		return EndpointSlice(o)
	case *coordinationv1.Lease:
		return Lease(o)
	case *corev1.Endpoints:
		return Endpoints(o)
	case *policyv1.PodDisruptionBudget:
		return PodDisruptionBudget(o)
	case *rbacv1.Role:
		return Role(o)
	case *rbacv1.ClusterRole:
		return ClusterRole(o)
	case *rbacv1.RoleBinding:
		return RoleBinding(o)
	case *rbacv1.ClusterRoleBinding:
		return ClusterRoleBinding(o)
	case *apiextensionsv1.CustomResourceDefinition:
		return CustomResourceDefinition(o)
	}
	return field.ErrorList{field.InternalError(nil, fmt.Errorf("no validation for %T", obj))}
}

// ValidateUpdate checks newObj as Validate does plus the rules of changing oldObj into it:
// immutable metadata and the fields each kind forbids changing.
func ValidateUpdate(newObj, oldObj runtime.Object) field.ErrorList {
	if n, ok := newObj.(*batchv1.CronJob); ok {
		if o, ok := oldObj.(*batchv1.CronJob); ok {
			return cronJobUpdate(n, o) // its rules for a new object depend on the old one
		}
	}
	errs := Validate(newObj)
	switch n := newObj.(type) {
	case *apiextensionsv1.CustomResourceDefinition:
		if o, ok := oldObj.(*apiextensionsv1.CustomResourceDefinition); ok {
			return CustomResourceDefinitionUpdate(n, o)
		}
	case *corev1.Pod:
		if o, ok := oldObj.(*corev1.Pod); ok {
			return append(errs, podUpdate(n, o)...)
		}
	case *corev1.Service:
		if o, ok := oldObj.(*corev1.Service); ok {
			return append(errs, serviceUpdate(n, o)...)
		}
	case *corev1.Namespace:
		if o, ok := oldObj.(*corev1.Namespace); ok {
			return append(errs, metaUpdate(&n.ObjectMeta, &o.ObjectMeta)...)
		}
	case *corev1.Node:
		if o, ok := oldObj.(*corev1.Node); ok {
			return append(errs, nodeUpdate(n, o)...)
		}
	case *corev1.Event:
		if o, ok := oldObj.(*corev1.Event); ok {
			return append(errs, metaUpdate(&n.ObjectMeta, &o.ObjectMeta)...)
		}
	case *corev1.ConfigMap:
		if o, ok := oldObj.(*corev1.ConfigMap); ok {
			return append(errs, configMapUpdate(n, o)...)
		}
	case *corev1.Secret:
		if o, ok := oldObj.(*corev1.Secret); ok {
			return append(errs, secretUpdate(n, o)...)
		}
	case *corev1.ServiceAccount:
		if o, ok := oldObj.(*corev1.ServiceAccount); ok {
			return append(errs, metaUpdate(&n.ObjectMeta, &o.ObjectMeta)...)
		}
	case *autoscalingv2.HorizontalPodAutoscaler:
		if o, ok := oldObj.(*autoscalingv2.HorizontalPodAutoscaler); ok {
			return append(errs, metaUpdate(&n.ObjectMeta, &o.ObjectMeta)...)
		}
	case *autoscalingv1.HorizontalPodAutoscaler:
		if o, ok := oldObj.(*autoscalingv1.HorizontalPodAutoscaler); ok {
			return append(errs, metaUpdate(&n.ObjectMeta, &o.ObjectMeta)...)
		}
	case *corev1.PersistentVolume:
		if o, ok := oldObj.(*corev1.PersistentVolume); ok {
			return append(errs, persistentVolumeUpdate(n, o)...)
		}
	case *corev1.PersistentVolumeClaim:
		if o, ok := oldObj.(*corev1.PersistentVolumeClaim); ok {
			return append(errs, persistentVolumeClaimUpdate(n, o)...)
		}
	case *storagev1.StorageClass:
		if o, ok := oldObj.(*storagev1.StorageClass); ok {
			return append(errs, storageClassUpdate(n, o)...)
		}
	case *networkingv1.NetworkPolicy:
		if o, ok := oldObj.(*networkingv1.NetworkPolicy); ok {
			return append(errs, networkPolicyUpdate(n, o)...)
		}
	case *appsv1.Deployment:
		if o, ok := oldObj.(*appsv1.Deployment); ok {
			return append(errs, workloadUpdate(&n.ObjectMeta, &o.ObjectMeta, n.Spec.Selector, o.Spec.Selector)...)
		}
	case *appsv1.ReplicaSet:
		if o, ok := oldObj.(*appsv1.ReplicaSet); ok {
			return append(errs, workloadUpdate(&n.ObjectMeta, &o.ObjectMeta, n.Spec.Selector, o.Spec.Selector)...)
		}
	case *appsv1.DaemonSet:
		if o, ok := oldObj.(*appsv1.DaemonSet); ok {
			return append(errs, workloadUpdate(&n.ObjectMeta, &o.ObjectMeta, n.Spec.Selector, o.Spec.Selector)...)
		}
	case *appsv1.StatefulSet:
		if o, ok := oldObj.(*appsv1.StatefulSet); ok {
			return append(errs, statefulSetUpdate(n, o)...)
		}
	case *appsv1.ControllerRevision:
		if o, ok := oldObj.(*appsv1.ControllerRevision); ok {
			return append(errs, controllerRevisionUpdate(n, o)...)
		}
	case *batchv1.Job:
		if o, ok := oldObj.(*batchv1.Job); ok {
			return append(errs, jobUpdate(n, o)...)
		}
	case *discoveryv1.EndpointSlice:
		if o, ok := oldObj.(*discoveryv1.EndpointSlice); ok {
			errs = append(errs, metaUpdate(&n.ObjectMeta, &o.ObjectMeta)...)
			return append(errs, immutable(n.AddressType, o.AddressType, field.NewPath("addressType"))...)
		}
	case *coordinationv1.Lease:
		if o, ok := oldObj.(*coordinationv1.Lease); ok {
			return append(errs, metaUpdate(&n.ObjectMeta, &o.ObjectMeta)...)
		}
	case *corev1.Endpoints:
		if o, ok := oldObj.(*corev1.Endpoints); ok {
			return append(errs, metaUpdate(&n.ObjectMeta, &o.ObjectMeta)...)
		}
	case *policyv1.PodDisruptionBudget: // the spec is mutable in policy/v1
		if o, ok := oldObj.(*policyv1.PodDisruptionBudget); ok {
			return append(errs, metaUpdate(&n.ObjectMeta, &o.ObjectMeta)...)
		}
	case *rbacv1.Role:
		if o, ok := oldObj.(*rbacv1.Role); ok {
			return append(errs, metaUpdate(&n.ObjectMeta, &o.ObjectMeta)...)
		}
	case *rbacv1.ClusterRole:
		if o, ok := oldObj.(*rbacv1.ClusterRole); ok {
			return append(errs, metaUpdate(&n.ObjectMeta, &o.ObjectMeta)...)
		}
	case *rbacv1.RoleBinding:
		if o, ok := oldObj.(*rbacv1.RoleBinding); ok {
			errs = append(errs, metaUpdate(&n.ObjectMeta, &o.ObjectMeta)...)
			return append(errs, roleRefUpdate(n.RoleRef, o.RoleRef)...)
		}
	case *rbacv1.ClusterRoleBinding:
		if o, ok := oldObj.(*rbacv1.ClusterRoleBinding); ok {
			errs = append(errs, metaUpdate(&n.ObjectMeta, &o.ObjectMeta)...)
			return append(errs, roleRefUpdate(n.RoleRef, o.RoleRef)...)
		}
	default:
		return errs
	}
	return append(errs, field.Invalid(field.NewPath("kind"), fmt.Sprintf("%T", oldObj), fmt.Sprintf("cannot update a %T into a %T", oldObj, newObj)))
}
