package apiserver

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/apiserver/authn"
)

// nodeLeaseNamespace holds the heartbeat Lease of each node, named after it.
const nodeLeaseNamespace = "kube-node-lease"

// NodeRestriction is the validating admission step that narrows what a node agent's identity
// may write, like Kubernetes' NodeRestriction plugin: its own Node (and status), its Lease in
// kube-node-lease, the status of pods bound to it, deleting pods bound to it (the kubelet ends
// a graceful delete), and Events. Any other write by a node is forbidden. Callers that are not
// nodes pass untouched.
func NodeRestriction(ctx context.Context, a *Attributes) error {
	u, _ := authn.UserFrom(ctx)
	node := u.NodeName()
	if node == "" {
		return nil
	}
	g, kind := a.Kind.GVK.Group, a.Kind.GVK.Kind
	switch {
	case g == "" && kind == "Node":
		if a.Name != node {
			return fmt.Errorf("node %q may not modify node %q", node, a.Name)
		}
		return nil
	case g == "coordination.k8s.io" && kind == "Lease":
		if a.Namespace != nodeLeaseNamespace || a.Name != node {
			return fmt.Errorf("node %q may only modify its own Lease %s/%s", node, nodeLeaseNamespace, node)
		}
		return nil
	case g == "" && kind == "Event":
		if a.Verb == "delete" {
			return fmt.Errorf("node %q may not delete events", node)
		}
		return nil
	case g == "" && kind == "Pod":
		return nodePodWrite(node, a)
	}
	return fmt.Errorf("node %q may not modify %s", node, a.Kind.Resource)
}

func nodePodWrite(node string, a *Attributes) error {
	bound := podNode(a.OldObject)
	switch {
	case a.Verb == "delete":
		if bound != node {
			return fmt.Errorf("node %q may only delete pods bound to it; pod %q is bound to %q", node, a.Name, bound)
		}
	case (a.Verb == "update" || a.Verb == "patch") && a.Subresource == "status":
		if bound != node {
			return fmt.Errorf("node %q may only update the status of pods bound to it; pod %q is bound to %q", node, a.Name, bound)
		}
	default:
		return fmt.Errorf("node %q may not %s pods except their status", node, a.Verb)
	}
	return nil
}

func podNode(obj runtime.Object) string {
	if p, ok := obj.(*corev1.Pod); ok {
		return p.Spec.NodeName
	}
	return ""
}
