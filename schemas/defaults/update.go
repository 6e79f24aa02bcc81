package defaults

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Update copies server-assigned values that a full replacement (PUT) may leave out from oldObj
// into newObj (a Service's allocations, a pod's QoS class), then defaults newObj. Without it, a
// PUT of a Service written without clusterIP would look like an attempt to change the allocated
// IP.
func Update(newObj, oldObj runtime.Object) {
	switch n := newObj.(type) {
	case *corev1.Service:
		if o, ok := oldObj.(*corev1.Service); ok {
			serviceAllocated(n, o)
		}
	case *corev1.Pod:
		// As kube's pod status strategy: the QoS class is set at creation, a write without
		// one keeps it.
		if o, ok := oldObj.(*corev1.Pod); ok && n.Status.QOSClass == "" {
			n.Status.QOSClass = o.Status.QOSClass
		}
	}
	Default(newObj)
}

func serviceAllocated(n, o *corev1.Service) {
	if n.Spec.Type == corev1.ServiceTypeExternalName || o.Spec.Type == corev1.ServiceTypeExternalName {
		return
	}
	if n.Spec.ClusterIP == "" && len(n.Spec.ClusterIPs) == 0 {
		n.Spec.ClusterIP = o.Spec.ClusterIP
		n.Spec.ClusterIPs = append([]string(nil), o.Spec.ClusterIPs...)
		if len(n.Spec.IPFamilies) == 0 {
			n.Spec.IPFamilies = append([]corev1.IPFamily(nil), o.Spec.IPFamilies...)
		}
		if n.Spec.IPFamilyPolicy == nil && o.Spec.IPFamilyPolicy != nil {
			policy := *o.Spec.IPFamilyPolicy
			n.Spec.IPFamilyPolicy = &policy
		}
	}
	nodePorts := map[int32]int32{}
	for _, p := range o.Spec.Ports {
		nodePorts[p.Port] = p.NodePort
	}
	// A type that needs no node ports drops the ones it kept from the old object, as kube's
	// dropTypeDependentFields does (one the client set anew is left for validation to refuse).
	external := n.Spec.Type == corev1.ServiceTypeNodePort || n.Spec.Type == corev1.ServiceTypeLoadBalancer
	for i := range n.Spec.Ports {
		switch p := &n.Spec.Ports[i]; {
		case external && p.NodePort == 0:
			p.NodePort = nodePorts[p.Port]
		case !external && p.NodePort != 0 && p.NodePort == nodePorts[p.Port]:
			p.NodePort = 0
		}
	}
	if !external && n.Spec.ExternalTrafficPolicy == o.Spec.ExternalTrafficPolicy {
		n.Spec.ExternalTrafficPolicy = ""
	}
	if n.Spec.Type != corev1.ServiceTypeLoadBalancer && n.Spec.AllocateLoadBalancerNodePorts != nil && o.Spec.AllocateLoadBalancerNodePorts != nil &&
		*n.Spec.AllocateLoadBalancerNodePorts == *o.Spec.AllocateLoadBalancerNodePorts {
		n.Spec.AllocateLoadBalancerNodePorts = nil
	}
	healthCheck := n.Spec.Type == corev1.ServiceTypeLoadBalancer && n.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	switch {
	case healthCheck && n.Spec.HealthCheckNodePort == 0:
		n.Spec.HealthCheckNodePort = o.Spec.HealthCheckNodePort
	case !healthCheck && n.Spec.HealthCheckNodePort == o.Spec.HealthCheckNodePort:
		n.Spec.HealthCheckNodePort = 0
	}
}
