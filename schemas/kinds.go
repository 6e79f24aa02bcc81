// Package schemas describes the API kinds Skiff serves: their names and resources, the runtime
// scheme, storage keys, manifest codecs, and (through subpackages) defaulting, validation and
// kubectl-style tables. The Go types are the upstream k8s.io/api ones.
package schemas

import (
	"strings"

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
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kind is one served resource and the names clients use for it.
type Kind struct {
	GVK          schema.GroupVersionKind
	Resource     string   // plural, "deployments"
	Singular     string   // "deployment"
	ShortNames   []string // "deploy"
	Categories   []string // "all"; set for custom kinds (built-ins: see the apiserver's discovery)
	Namespaced   bool
	ListKind     string   // "DeploymentList"
	Subresources []string // "status", "scale", "binding", "log", "exec", "attach", ...
	New          func() runtime.Object
	NewList      func() runtime.Object
	// Custom is set on kinds defined by a CustomResourceDefinition (see custom.go).
	Custom Custom
	// StoredAs is set on a version served over the objects of another version of the kind:
	// the storage keys are the same and the log holds the other version.
	StoredAs *StoredAs
}

// StoredAs names the version a kind's objects are stored as and converts to and from it, as
// kube-apiserver stores autoscaling/v2 HorizontalPodAutoscalers and serves v1 by conversion.
type StoredAs struct {
	GVK        schema.GroupVersionKind
	ToStored   func(runtime.Object) (runtime.Object, error)
	FromStored func(runtime.Object) (runtime.Object, error)
}

// GroupVersionResource is the kind's resource coordinates.
func (k *Kind) GroupVersionResource() schema.GroupVersionResource {
	return k.GVK.GroupVersion().WithResource(k.Resource)
}

// HasSubresource reports whether the kind serves the named subresource.
func (k *Kind) HasSubresource(sub string) bool {
	for _, s := range k.Subresources {
		if s == sub {
			return true
		}
	}
	return false
}

var (
	core        = corev1.SchemeGroupVersion
	apps        = appsv1.SchemeGroupVersion
	discovery   = discoveryv1.SchemeGroupVersion
	coordinates = coordinationv1.SchemeGroupVersion
	rbac        = rbacv1.SchemeGroupVersion
	batch       = batchv1.SchemeGroupVersion
	autoscaling = autoscalingv2.SchemeGroupVersion
	policy      = policyv1.SchemeGroupVersion
	apiext      = apiextensionsv1.SchemeGroupVersion
	storage     = storagev1.SchemeGroupVersion
	networking  = networkingv1.SchemeGroupVersion
)

// kinds is the table every lookup reads; order is the order of Kinds() (discovery output).
var kinds = []*Kind{
	{GVK: core.WithKind("Namespace"), Resource: "namespaces", Singular: "namespace", ShortNames: []string{"ns"},
		Subresources: []string{"status"},
		New:          func() runtime.Object { return &corev1.Namespace{} }, NewList: func() runtime.Object { return &corev1.NamespaceList{} }},
	{GVK: core.WithKind("Pod"), Resource: "pods", Singular: "pod", ShortNames: []string{"po"}, Namespaced: true,
		Subresources: []string{"status", "binding", "log", "exec", "attach", "portforward", "eviction"},
		New:          func() runtime.Object { return &corev1.Pod{} }, NewList: func() runtime.Object { return &corev1.PodList{} }},
	{GVK: core.WithKind("Service"), Resource: "services", Singular: "service", ShortNames: []string{"svc"}, Namespaced: true,
		Subresources: []string{"status"},
		New:          func() runtime.Object { return &corev1.Service{} }, NewList: func() runtime.Object { return &corev1.ServiceList{} }},
	{GVK: core.WithKind("Node"), Resource: "nodes", Singular: "node", ShortNames: []string{"no"},
		Subresources: []string{"status"},
		New:          func() runtime.Object { return &corev1.Node{} }, NewList: func() runtime.Object { return &corev1.NodeList{} }},
	{GVK: core.WithKind("Event"), Resource: "events", Singular: "event", ShortNames: []string{"ev"}, Namespaced: true,
		New: func() runtime.Object { return &corev1.Event{} }, NewList: func() runtime.Object { return &corev1.EventList{} }},
	{GVK: core.WithKind("ConfigMap"), Resource: "configmaps", Singular: "configmap", ShortNames: []string{"cm"}, Namespaced: true,
		New: func() runtime.Object { return &corev1.ConfigMap{} }, NewList: func() runtime.Object { return &corev1.ConfigMapList{} }},
	{GVK: core.WithKind("Secret"), Resource: "secrets", Singular: "secret", Namespaced: true,
		New: func() runtime.Object { return &corev1.Secret{} }, NewList: func() runtime.Object { return &corev1.SecretList{} }},
	{GVK: core.WithKind("ServiceAccount"), Resource: "serviceaccounts", Singular: "serviceaccount", ShortNames: []string{"sa"}, Namespaced: true,
		Subresources: []string{"token"},
		New:          func() runtime.Object { return &corev1.ServiceAccount{} }, NewList: func() runtime.Object { return &corev1.ServiceAccountList{} }},
	{GVK: core.WithKind("PersistentVolume"), Resource: "persistentvolumes", Singular: "persistentvolume", ShortNames: []string{"pv"},
		Subresources: []string{"status"},
		New:          func() runtime.Object { return &corev1.PersistentVolume{} }, NewList: func() runtime.Object { return &corev1.PersistentVolumeList{} }},
	{GVK: core.WithKind("PersistentVolumeClaim"), Resource: "persistentvolumeclaims", Singular: "persistentvolumeclaim", ShortNames: []string{"pvc"}, Namespaced: true,
		Subresources: []string{"status"},
		New:          func() runtime.Object { return &corev1.PersistentVolumeClaim{} }, NewList: func() runtime.Object { return &corev1.PersistentVolumeClaimList{} }},
	{GVK: storage.WithKind("StorageClass"), Resource: "storageclasses", Singular: "storageclass", ShortNames: []string{"sc"},
		New: func() runtime.Object { return &storagev1.StorageClass{} }, NewList: func() runtime.Object { return &storagev1.StorageClassList{} }},
	{GVK: apps.WithKind("Deployment"), Resource: "deployments", Singular: "deployment", ShortNames: []string{"deploy"}, Namespaced: true,
		Subresources: []string{"status", "scale"},
		New:          func() runtime.Object { return &appsv1.Deployment{} }, NewList: func() runtime.Object { return &appsv1.DeploymentList{} }},
	{GVK: apps.WithKind("ReplicaSet"), Resource: "replicasets", Singular: "replicaset", ShortNames: []string{"rs"}, Namespaced: true,
		Subresources: []string{"status", "scale"},
		New:          func() runtime.Object { return &appsv1.ReplicaSet{} }, NewList: func() runtime.Object { return &appsv1.ReplicaSetList{} }},
	{GVK: apps.WithKind("DaemonSet"), Resource: "daemonsets", Singular: "daemonset", ShortNames: []string{"ds"}, Namespaced: true,
		Subresources: []string{"status"},
		New:          func() runtime.Object { return &appsv1.DaemonSet{} }, NewList: func() runtime.Object { return &appsv1.DaemonSetList{} }},
	{GVK: apps.WithKind("StatefulSet"), Resource: "statefulsets", Singular: "statefulset", ShortNames: []string{"sts"}, Namespaced: true,
		Subresources: []string{"status", "scale"},
		New:          func() runtime.Object { return &appsv1.StatefulSet{} }, NewList: func() runtime.Object { return &appsv1.StatefulSetList{} }},
	{GVK: apps.WithKind("ControllerRevision"), Resource: "controllerrevisions", Singular: "controllerrevision", Namespaced: true,
		New: func() runtime.Object { return &appsv1.ControllerRevision{} }, NewList: func() runtime.Object { return &appsv1.ControllerRevisionList{} }},
	{GVK: batch.WithKind("Job"), Resource: "jobs", Singular: "job", Namespaced: true,
		Subresources: []string{"status"},
		New:          func() runtime.Object { return &batchv1.Job{} }, NewList: func() runtime.Object { return &batchv1.JobList{} }},
	{GVK: batch.WithKind("CronJob"), Resource: "cronjobs", Singular: "cronjob", ShortNames: []string{"cj"}, Namespaced: true,
		Subresources: []string{"status"},
		New:          func() runtime.Object { return &batchv1.CronJob{} }, NewList: func() runtime.Object { return &batchv1.CronJobList{} }},
	{GVK: autoscaling.WithKind("HorizontalPodAutoscaler"), Resource: "horizontalpodautoscalers", Singular: "horizontalpodautoscaler", ShortNames: []string{"hpa"}, Namespaced: true,
		Subresources: []string{"status"},
		New:          func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscaler{} }, NewList: func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscalerList{} }},
	// After v2, so v2 is autoscaling's preferred version and what a versionless lookup finds.
	{GVK: autoscalingv1.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler"), Resource: "horizontalpodautoscalers", Singular: "horizontalpodautoscaler", ShortNames: []string{"hpa"}, Namespaced: true,
		Subresources: []string{"status"}, StoredAs: hpaStoredAsV2,
		New: func() runtime.Object { return &autoscalingv1.HorizontalPodAutoscaler{} }, NewList: func() runtime.Object { return &autoscalingv1.HorizontalPodAutoscalerList{} }},
	{GVK: discovery.WithKind("EndpointSlice"), Resource: "endpointslices", Singular: "endpointslice", Namespaced: true,
		New: func() runtime.Object { return &discoveryv1.EndpointSlice{} }, NewList: func() runtime.Object { return &discoveryv1.EndpointSliceList{} }},
	{GVK: core.WithKind("Endpoints"), Resource: "endpoints", Singular: "endpoints", ShortNames: []string{"ep"}, Namespaced: true,
		New: func() runtime.Object { return &corev1.Endpoints{} }, NewList: func() runtime.Object { return &corev1.EndpointsList{} }},
	{GVK: policy.WithKind("PodDisruptionBudget"), Resource: "poddisruptionbudgets", Singular: "poddisruptionbudget", ShortNames: []string{"pdb"}, Namespaced: true,
		Subresources: []string{"status"},
		New:          func() runtime.Object { return &policyv1.PodDisruptionBudget{} }, NewList: func() runtime.Object { return &policyv1.PodDisruptionBudgetList{} }},
	{GVK: networking.WithKind("NetworkPolicy"), Resource: "networkpolicies", Singular: "networkpolicy", ShortNames: []string{"netpol"}, Namespaced: true,
		New: func() runtime.Object { return &networkingv1.NetworkPolicy{} }, NewList: func() runtime.Object { return &networkingv1.NetworkPolicyList{} }},
	{GVK: coordinates.WithKind("Lease"), Resource: "leases", Singular: "lease", Namespaced: true,
		New: func() runtime.Object { return &coordinationv1.Lease{} }, NewList: func() runtime.Object { return &coordinationv1.LeaseList{} }},
	{GVK: rbac.WithKind("Role"), Resource: "roles", Singular: "role", Namespaced: true,
		New: func() runtime.Object { return &rbacv1.Role{} }, NewList: func() runtime.Object { return &rbacv1.RoleList{} }},
	{GVK: rbac.WithKind("ClusterRole"), Resource: "clusterroles", Singular: "clusterrole",
		New: func() runtime.Object { return &rbacv1.ClusterRole{} }, NewList: func() runtime.Object { return &rbacv1.ClusterRoleList{} }},
	{GVK: rbac.WithKind("RoleBinding"), Resource: "rolebindings", Singular: "rolebinding", Namespaced: true,
		New: func() runtime.Object { return &rbacv1.RoleBinding{} }, NewList: func() runtime.Object { return &rbacv1.RoleBindingList{} }},
	{GVK: rbac.WithKind("ClusterRoleBinding"), Resource: "clusterrolebindings", Singular: "clusterrolebinding",
		New: func() runtime.Object { return &rbacv1.ClusterRoleBinding{} }, NewList: func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} }},
	{GVK: apiext.WithKind("CustomResourceDefinition"), Resource: "customresourcedefinitions", Singular: "customresourcedefinition",
		ShortNames: []string{"crd", "crds"}, Subresources: []string{"status"},
		New: func() runtime.Object { return &apiextensionsv1.CustomResourceDefinition{} }, NewList: func() runtime.Object { return &apiextensionsv1.CustomResourceDefinitionList{} }},
}

func init() {
	for _, k := range kinds {
		k.ListKind = k.GVK.Kind + "List"
	}
}

// Kinds returns every served kind in a stable order, the built-in ones first, then those of
// the CustomResourceDefinitions. Callers must not modify them.
func Kinds() []*Kind { return allKinds() }

// ByResource finds a kind by its API coordinates ("apps", "v1", "deployments"); group "" is core.
func ByResource(group, version, resource string) (*Kind, bool) {
	for _, k := range allKinds() {
		if k.GVK.Group == group && k.GVK.Version == version && k.Resource == resource {
			return k, true
		}
	}
	return nil, false
}

// ByGVK finds a kind by group, version and kind.
func ByGVK(gvk schema.GroupVersionKind) (*Kind, bool) {
	for _, k := range allKinds() {
		if k.GVK == gvk {
			return k, true
		}
	}
	return nil, false
}

// Lookup resolves the names kubectl accepts on its command line: plural, singular, short name or
// Kind (any case), optionally qualified by group ("deployment.apps") or version and group
// ("deployments.v1.apps").
func Lookup(s string) (*Kind, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, false
	}
	if k, ok := lookupName(s, "", ""); ok {
		return k, true
	}
	name, rest, qualified := strings.Cut(s, ".")
	if !qualified {
		return nil, false
	}
	if k, ok := lookupName(name, "", rest); ok { // name.group
		return k, true
	}
	version, group, ok := strings.Cut(rest, ".")
	if !ok {
		return nil, false
	}
	return lookupName(name, version, group) // name.version.group
}

// lookupName matches name against every form of each kind; version "" matches any version and
// group "" with version "" matches any group (an unqualified name).
func lookupName(name, version, group string) (*Kind, bool) {
	qualified := version != "" || group != ""
	for _, k := range allKinds() {
		if qualified && !groupMatches(k, group) {
			continue
		}
		if version != "" && k.GVK.Version != version {
			continue
		}
		if matchesName(k, name) {
			return k, true
		}
	}
	return nil, false
}

// groupMatches accepts "core" (as in "pods.v1.core") for the legacy group.
func groupMatches(k *Kind, group string) bool {
	if k.GVK.Group == "" {
		return group == "core" || group == ""
	}
	return strings.EqualFold(k.GVK.Group, group)
}

func matchesName(k *Kind, name string) bool {
	if strings.EqualFold(name, k.Resource) || strings.EqualFold(name, k.Singular) || strings.EqualFold(name, k.GVK.Kind) {
		return true
	}
	for _, sn := range k.ShortNames {
		if strings.EqualFold(name, sn) {
			return true
		}
	}
	return false
}
