// Package defaults fills in the fields the Kubernetes apiserver sets when a client leaves them
// out, so objects read back from Skiff look like those read back from Kubernetes.
package defaults

import (
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
)

// Default sets unset fields of obj in place. Objects of other types are left alone. It is
// idempotent: defaulting a defaulted object changes nothing.
func Default(obj runtime.Object) {
	switch o := obj.(type) {
	case *corev1.Pod:
		Pod(o)
	case *corev1.Service:
		Service(o)
	case *corev1.Namespace:
		Namespace(o)
	case *corev1.Secret:
		Secret(o)
	case *appsv1.Deployment:
		Deployment(o)
	case *appsv1.ReplicaSet:
		ReplicaSet(o)
	case *appsv1.DaemonSet:
		DaemonSet(o)
	case *appsv1.StatefulSet:
		StatefulSet(o)
	case *batchv1.Job:
		Job(o)
	case *batchv1.CronJob:
		CronJob(o)
	case *autoscalingv2.HorizontalPodAutoscaler:
		HorizontalPodAutoscaler(o)
	case *autoscalingv1.HorizontalPodAutoscaler:
		HorizontalPodAutoscalerV1(o)
	case *discoveryv1.EndpointSlice:
		EndpointSlice(o)
	case *corev1.Endpoints:
		Endpoints(o)
	case *corev1.PersistentVolume:
		PersistentVolume(o)
	case *corev1.PersistentVolumeClaim:
		PersistentVolumeClaim(o)
	case *storagev1.StorageClass:
		StorageClass(o)
	case *networkingv1.NetworkPolicy:
		NetworkPolicy(o)
	case *rbacv1.RoleBinding:
		Subjects(o.Subjects)
	case *rbacv1.ClusterRoleBinding:
		Subjects(o.Subjects)
	case *apiextensionsv1.CustomResourceDefinition:
		apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(o)
	case *coordinationv1.Lease, *policyv1.PodDisruptionBudget, *corev1.ConfigMap, *corev1.ServiceAccount, *corev1.Node, *corev1.Event, *rbacv1.Role, *rbacv1.ClusterRole,
		*appsv1.ControllerRevision:
		// Nothing is defaulted.
	}
}

// Namespace records the phase Active and the immutable name label the apiserver adds.
func Namespace(ns *corev1.Namespace) {
	if ns.Status.Phase == "" {
		ns.Status.Phase = corev1.NamespaceActive
	}
	if ns.Name != "" {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[corev1.LabelMetadataName] = ns.Name
	}
}

// EndpointSlice defaults port protocols to TCP and port names to "".
func EndpointSlice(s *discoveryv1.EndpointSlice) {
	for i := range s.Ports {
		p := &s.Ports[i]
		if p.Protocol == nil {
			tcp := corev1.ProtocolTCP
			p.Protocol = &tcp
		}
		if p.Name == nil {
			empty := ""
			p.Name = &empty
		}
	}
}

func ptr[T any](v T) *T { return &v }

// Secret defaults type Opaque and folds the write-only stringData into data, as the apiserver
// does on conversion (stringData wins over data for the same key).
func Secret(s *corev1.Secret) {
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
	for k, v := range s.StringData {
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
}

// Endpoints defaults port protocols to TCP, as Kubernetes does.
func Endpoints(ep *corev1.Endpoints) {
	for i := range ep.Subsets {
		for j := range ep.Subsets[i].Ports {
			if p := &ep.Subsets[i].Ports[j]; p.Protocol == "" {
				p.Protocol = corev1.ProtocolTCP
			}
		}
	}
}
