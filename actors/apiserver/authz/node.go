package authz

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/apiserver/authn"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/logvalue"
)

// Node authorizes what node identities read of Secrets, ConfigMaps and
// PersistentVolumeClaims, as Kubernetes' node authorizer does: a node may get one only while a pod bound to it references it (env,
// envFrom, volumes, image pull secrets), and may never list or watch them. Its decision on
// reads of those kinds is final, whatever RBAC grants (clusters bootstrapped before this kept a
// system:node role that granted read on both); every other request goes to Next.
type Node struct {
	Next Authorizer
	log  *statelog.Log
	pods *informer.Informer // by spec.nodeName
}

// nodeScoped are the kinds only the pod graph grants to a node.
var nodeScoped = map[string]func(*corev1.Pod) []string{"secrets": podSecretNames, "configmaps": podConfigMapNames,
	"persistentvolumeclaims": podClaimNames}

var readVerbs = map[string]bool{"get": true, "list": true, "watch": true}

// NewNode decides from pods, a pod informer (the process's shared one), which it indexes by
// node, and from log on a miss.
func NewNode(log *statelog.Log, pods *informer.Informer, next Authorizer) *Node {
	pods.AddIndexer(informer.IndexNodeName, informer.PodNodeName)
	return &Node{Next: next, log: log, pods: pods}
}

// WaitForSync waits for the pod mirror's first snapshot.
func (n *Node) WaitForSync(ctx context.Context) bool { return n.pods.WaitForSync(ctx) }

// Authorize decides node reads of Secrets and ConfigMaps and passes the rest on.
func (n *Node) Authorize(a Attributes) (bool, string) {
	node := a.User.NodeName()
	refs, scoped := nodeScoped[a.Resource]
	// Writes are RBAC's to refuse (system:node grants none on these kinds).
	if node == "" || !a.ResourceRequest || a.APIGroup != "" || !scoped || !readVerbs[a.Verb] {
		return n.Next.Authorize(a)
	}
	if a.Verb != "get" || a.Name == "" || a.Subresource != "" {
		return false, "can only get individual resources of this type"
	}
	if n.referenced(node, a, refs) {
		return true, ""
	}
	// The pod may be bound at a revision this mirror has not applied yet (the node saw it
	// first): ask the log, current to its last write, before saying no.
	if ok, err := n.referencedInLog(node, a, refs); err != nil {
		return false, "cannot read the pods of node " + node + ": " + err.Error()
	} else if ok {
		return true, ""
	}
	return false, fmt.Sprintf("no relationship found between node '%s' and this object", node)
}

func (n *Node) referenced(node string, a Attributes, refs func(*corev1.Pod) []string) bool {
	for _, o := range n.pods.ByIndex(informer.IndexNodeName, node) {
		if p := o.(*corev1.Pod); p.Namespace == a.Namespace && slices.Contains(refs(p), a.Name) {
			return true
		}
	}
	return false
}

// referencedInLog checks the pods of a's namespace as the log holds them now; it costs the
// namespace's pods, so it is the fallback only.
func (n *Node) referencedInLog(node string, a Attributes, refs func(*corev1.Pod) []string) (bool, error) {
	k, _ := schemas.ByResource("", "v1", "pods")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	es, _, err := n.log.List(ctx, schemas.StoragePrefix(k, a.Namespace), statelog.ReadOptions{Consistent: true})
	if err != nil {
		return false, err
	}
	for _, e := range es {
		var p corev1.Pod
		if logvalue.Unmarshal(e.Value, &p) == nil && p.Spec.NodeName == node && slices.Contains(refs(&p), a.Name) {
			return true, nil
		}
	}
	return false, nil
}

// CheckEscalation is Next's: RBAC writes are checked against the rules RBAC holds.
func (n *Node) CheckEscalation(u authn.User, verb string, obj, old runtime.Object) error {
	if ec, ok := n.Next.(EscalationChecker); ok {
		return ec.CheckEscalation(u, verb, obj, old)
	}
	return nil
}
