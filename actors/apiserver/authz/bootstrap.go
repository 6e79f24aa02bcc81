package authz

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/apiserver/authn"
)

// Names of the component identities the bootstrap policy grants (the NATS identities of H4's
// secured mode map onto the same names).
const (
	SchedulerUser         = "system:kube-scheduler"
	ControllerManagerUser = "system:kube-controller-manager"
	// ServiceAccountIssuerDiscovery may read the OIDC discovery document and the JWKS.
	ServiceAccountIssuerDiscovery = "system:service-account-issuer-discovery"
)

var (
	read  = []string{"get", "list", "watch"}
	write = []string{"create", "update", "patch", "delete", "deletecollection"}
	all   = []string{"*"}
	// The groups Skiff serves, for rules that cover "everything of the built-in kinds".
	servedGroups = []string{"", "apps", "batch", "autoscaling", "discovery.k8s.io", "coordination.k8s.io", "policy", "storage.k8s.io", "networking.k8s.io"}
)

// metricsReader reads the resource metrics; view, edit and admin have it, as Kubernetes'
// system:aggregated-metrics-reader is aggregated into them.
var metricsReader = rule(read, []string{"metrics.k8s.io"}, []string{"pods", "nodes"})

// exportSpans lets a component send its spans to the embedded span store (OTLP/HTTP path).
var exportSpans = rbacv1.PolicyRule{Verbs: []string{"post"}, NonResourceURLs: []string{"/v1/traces"}}

func rule(verbs, groups, resources []string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources}
}

func workloads(verbs []string, withSecrets, withExec bool) []rbacv1.PolicyRule {
	core := []string{"pods", "pods/log", "services", "endpoints", "configmaps", "events", "serviceaccounts", "persistentvolumeclaims"}
	if withSecrets {
		core = append(core, "secrets")
	}
	if withExec {
		core = append(core, "pods/exec")
	}
	var evict []rbacv1.PolicyRule
	if withExec { // the writers (edit) may evict, as Kubernetes' edit role may
		evict = append(evict, rule([]string{"create"}, []string{""}, []string{"pods/eviction"}))
	}
	return append([]rbacv1.PolicyRule{
		rule(verbs, []string{""}, core),
		rule(verbs, []string{"apps"}, []string{"deployments", "deployments/scale", "replicasets", "replicasets/scale", "daemonsets",
			"statefulsets", "statefulsets/scale"}),
		rule(read, []string{"apps"}, []string{"controllerrevisions"}),
		rule(verbs, []string{"batch"}, []string{"jobs", "cronjobs"}),
		rule(verbs, []string{"autoscaling"}, []string{"horizontalpodautoscalers"}),
		rule(verbs, []string{"discovery.k8s.io"}, []string{"endpointslices"}),
		rule(verbs, []string{"coordination.k8s.io"}, []string{"leases"}),
		rule(verbs, []string{"policy"}, []string{"poddisruptionbudgets"}),
		rule(verbs, []string{"networking.k8s.io"}, []string{"networkpolicies"}),
		rule(read, []string{""}, []string{"namespaces", "pods/status", "services/status", "persistentvolumeclaims/status"}),
		rule(read, []string{"policy"}, []string{"poddisruptionbudgets/status"}),
		rule(read, []string{"apps"}, []string{"deployments/status", "replicasets/status", "daemonsets/status", "statefulsets/status"}),
		rule(read, []string{"batch"}, []string{"jobs/status", "cronjobs/status"}),
		rule(read, []string{"autoscaling"}, []string{"horizontalpodautoscalers/status"}),
		metricsReader,
	}, evict...)
}

// BootstrapPolicy is the RBAC every cluster starts with, as Kubernetes' bootstrap policy names it:
// cluster-admin, admin, edit, view, the component roles, and discovery for every authenticated user.
func BootstrapPolicy() []runtime.Object {
	roles := map[string][]rbacv1.PolicyRule{
		"cluster-admin": {rule(all, all, all), {Verbs: all, NonResourceURLs: all}},
		"admin":         {rule(all, all, all)},
		"edit":          workloads(append(append([]string{}, read...), write...), true, true),
		"view":          workloads(read, false, false),
		// Kubernetes' name for the metrics reading that view, edit and admin also have.
		"system:aggregated-metrics-reader": {metricsReader},
		// Every user may ask what it may do and who it is (kubectl auth can-i, auth whoami).
		"system:basic-user": {
			rule([]string{"create"}, []string{"authorization.k8s.io"}, []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}),
			rule([]string{"create"}, []string{"authentication.k8s.io"}, []string{"selfsubjectreviews"}),
		},
		"system:discovery": {{Verbs: []string{"get"}, NonResourceURLs: []string{
			"/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", "/version", "/version/", "/healthz", "/livez", "/readyz"}}},
		// Nodes may read what they run and write their Node, Lease, pod status and Events;
		// NodeRestriction (admission) narrows the writes to the node's own objects. Secrets and
		// ConfigMaps are the node authorizer's (node.go): only those their pods reference.
		"system:node": {
			rule(read, servedGroups, []string{"pods", "nodes", "services", "endpointslices", "namespaces", "leases", "networkpolicies"}),
			rule([]string{"create", "update", "patch", "delete"}, []string{""}, []string{"nodes", "nodes/status"}),
			rule([]string{"update", "patch"}, []string{""}, []string{"pods/status"}),
			rule([]string{"delete"}, []string{""}, []string{"pods"}),
			rule([]string{"create", "update", "patch"}, []string{""}, []string{"events"}),
			rule([]string{"create", "update", "patch", "delete"}, []string{"coordination.k8s.io"}, []string{"leases"}),
			// Tokens for the projected volumes of its pods; the token handler refuses any other
			// (NodeRestriction's rule: bound to a pod on this node running as that account).
			rule([]string{"get"}, []string{""}, []string{"serviceaccounts"}),
			rule([]string{"create"}, []string{""}, []string{"serviceaccounts/token"}),
			// The volumes of its pods' claims, to mount them, and of deleted local-path volumes,
			// to remove their data (the claims themselves are the node authorizer's, node.go).
			rule([]string{"get"}, []string{""}, []string{"persistentvolumes"}),
			exportSpans,
		},
		// What a workload's ServiceAccount may read of the issuer (kube binds it to every account).
		ServiceAccountIssuerDiscovery: {{Verbs: []string{"get"}, NonResourceURLs: []string{
			"/.well-known/openid-configuration", "/.well-known/openid-configuration/", "/openid/v1/jwks", "/openid/v1/jwks/"}}},
		SchedulerUser: {
			exportSpans,
			rule(read, all, all),
			rule([]string{"create"}, []string{""}, []string{"pods/binding"}),
			rule([]string{"update", "patch"}, []string{""}, []string{"pods/status"}),
			// The node it picks for a WaitForFirstConsumer claim (kube's volume-scheduler role).
			rule([]string{"update", "patch"}, []string{""}, []string{"persistentvolumeclaims"}),
			rule([]string{"create", "update", "patch"}, []string{""}, []string{"events"}),
			rule([]string{"create", "update", "patch", "get"}, []string{"coordination.k8s.io"}, []string{"leases"}),
		},
		// The controllers write the workload kinds, Nodes (lifecycle), Namespaces (deletion) and
		// delete what the garbage collector collects; they never create or change RBAC objects.
		ControllerManagerUser: {
			exportSpans,
			rule(read, all, all),
			rule([]string{"delete"}, all, all), // the garbage collector removes dependents of any kind
			rule(all, []string{""}, []string{"pods", "pods/status", "pods/binding", "nodes", "nodes/status", "namespaces", "namespaces/status", "namespaces/finalize",
				"services", "services/status", "endpoints", "configmaps", "events", "serviceaccounts",
				"persistentvolumes", "persistentvolumes/status", "persistentvolumeclaims", "persistentvolumeclaims/status"}),
			rule(all, []string{"apps"}, []string{"deployments", "deployments/status", "deployments/scale", "replicasets", "replicasets/status", "replicasets/scale",
				"daemonsets", "daemonsets/status", "statefulsets", "statefulsets/status", "statefulsets/scale", "controllerrevisions"}),
			rule(all, []string{"batch"}, []string{"jobs", "jobs/status", "cronjobs", "cronjobs/status"}),
			rule(all, []string{"autoscaling"}, []string{"horizontalpodautoscalers", "horizontalpodautoscalers/status"}),
			rule(all, []string{"discovery.k8s.io"}, []string{"endpointslices"}),
			rule(all, []string{"coordination.k8s.io"}, []string{"leases"}),
			rule([]string{"update", "patch"}, []string{"policy"}, []string{"poddisruptionbudgets/status"}),
		},
	}
	bindings := []struct {
		role    string
		subject rbacv1.Subject
	}{
		{"cluster-admin", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: authn.GroupMasters}},
		{"system:discovery", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: authn.GroupAuthenticated}},
		{"system:basic-user", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: authn.GroupAuthenticated}},
		{"system:node", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: authn.GroupNodes}},
		{SchedulerUser, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: SchedulerUser}},
		{ControllerManagerUser, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: ControllerManagerUser}},
		{ServiceAccountIssuerDiscovery, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: authn.GroupServiceAccounts}},
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}}
	}
	var out []runtime.Object
	for _, name := range []string{"cluster-admin", "admin", "edit", "view", "system:basic-user", "system:discovery", "system:node", SchedulerUser, ControllerManagerUser, ServiceAccountIssuerDiscovery} {
		out = append(out, &rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, ObjectMeta: meta(name), Rules: roles[name]})
	}
	for _, b := range bindings {
		out = append(out, &rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: meta(b.role), RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role}, Subjects: []rbacv1.Subject{b.subject}})
	}
	return out
}
