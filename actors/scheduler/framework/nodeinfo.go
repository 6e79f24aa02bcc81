package framework

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// NodeInfo is one node with the pods counted against it. A NodeInfo reachable from a
// Snapshot is never modified: the cache copies it before changing it (copy-on-write).
type NodeInfo struct {
	node *v1.Node
	// The node's unschedulable flag and taints, read by the filters of every pod on every node
	// evaluated: kept here, next to the counts the filters read, they cost no miss on the Node.
	unschedulable bool
	taints        []v1.Taint
	hostname      string
	zone          string   // topology.kubernetes.io/zone, read on every spread check
	taintReason   []string // the TaintToleration reason for each of node.Spec.Taints
	allocatable   Resource
	maxPods       int64 // -1: unlimited

	pods      []*podInfo
	requested Resource // sum of the pods' requests: what filtering compares with allocatable
	nonZero   Resource // the same with defaults for empty requests: what scoring uses
	ports     map[portKey]map[string]int
	owners    []ownerCount     // pods per interned controller owner, for spreading replicas
	labels    map[uint32]int32 // pods per interned (namespace, label, value), for selectors
	anti      []*podInfo       // pods with required anti-affinity terms

	epoch uint64 // cache epoch it was copied in; older ones may be shared with a snapshot
}

// ownerCount is how many of a node's pods one controller owns. A node holds few owners, so
// a scan of a short slice finds one faster than a map, and copies cheaper.
type ownerCount struct {
	id uint32
	n  int32
}

type portKey struct {
	protocol v1.Protocol
	port     int32
}

// Node returns the node object (nil for a node known only through its pods).
func (n *NodeInfo) Node() *v1.Node { return n.node }

// Requested returns the sum of the requests of the pods on the node.
func (n *NodeInfo) Requested() Resource { return n.requested.clone() }

// NumPods returns how many pods are counted on the node.
func (n *NodeInfo) NumPods() int { return len(n.pods) }

func newNodeInfo(epoch uint64) *NodeInfo {
	return &NodeInfo{
		ports:  map[portKey]map[string]int{},
		labels: map[uint32]int32{},
		epoch:  epoch,
	}
}

func (n *NodeInfo) clone(epoch uint64) *NodeInfo {
	c := *n
	c.epoch = epoch
	c.pods = append([]*podInfo(nil), n.pods...)
	c.anti = append([]*podInfo(nil), n.anti...)
	c.requested = n.requested.clone()
	c.nonZero = n.nonZero.clone()
	c.ports = make(map[portKey]map[string]int, len(n.ports))
	for k, ips := range n.ports {
		m := make(map[string]int, len(ips))
		for ip, cnt := range ips {
			m[ip] = cnt
		}
		c.ports[k] = m
	}
	c.owners = append([]ownerCount(nil), n.owners...)
	c.labels = make(map[uint32]int32, len(n.labels))
	for k, v := range n.labels {
		c.labels[k] = v
	}
	return &c
}

func (n *NodeInfo) setNode(node *v1.Node) {
	n.node = node
	n.unschedulable, n.taints = node.Spec.Unschedulable, node.Spec.Taints
	n.hostname = node.Labels[hostnameKey]
	if n.hostname == "" {
		n.hostname = node.Name
	}
	n.zone = node.Labels[v1.LabelTopologyZone]
	n.taintReason = make([]string, len(node.Spec.Taints))
	for i, t := range node.Spec.Taints {
		n.taintReason[i] = fmt.Sprintf("node(s) had untolerated taint {%s: %s}", t.Key, t.Value)
	}
	n.allocatable = resourceFromList(node.Status.Allocatable)
	n.maxPods = -1 // a node that reports no pod capacity is not limited by count
	if q, ok := node.Status.Allocatable[v1.ResourcePods]; ok {
		n.maxPods = q.Value()
	}
}

func (n *NodeInfo) addPod(pi *podInfo) {
	n.pods = append(n.pods, pi)
	n.requested.add(&pi.req)
	n.nonZero.add(&pi.nonZero)
	n.countPod(pi, 1)
	if len(pi.anti) > 0 {
		n.anti = append(n.anti, pi)
	}
}

// removePod removes the pod with key and reports whether it was there.
func (n *NodeInfo) removePod(key string) bool {
	for i, pi := range n.pods {
		if pi.key != key {
			continue
		}
		n.pods[i] = n.pods[len(n.pods)-1]
		n.pods[len(n.pods)-1] = nil
		n.pods = n.pods[:len(n.pods)-1]
		n.requested.sub(&pi.req)
		n.nonZero.sub(&pi.nonZero)
		n.countPod(pi, -1)
		for j, a := range n.anti {
			if a == pi {
				n.anti = append(n.anti[:j], n.anti[j+1:]...)
				break
			}
		}
		return true
	}
	return false
}

func (n *NodeInfo) countPod(pi *podInfo, d int) {
	for _, id := range pi.labelIDs {
		if c := n.labels[id] + int32(d); c == 0 {
			delete(n.labels, id)
		} else {
			n.labels[id] = c
		}
	}
	if pi.ownerID != 0 {
		n.countOwner(pi.ownerID, int32(d))
	}
	for _, hp := range pi.ports {
		k := portKey{hp.protocol, hp.port}
		ips := n.ports[k]
		if ips == nil {
			ips = map[string]int{}
			n.ports[k] = ips
		}
		if ips[hp.ip]+d == 0 {
			delete(ips, hp.ip)
			if len(ips) == 0 {
				delete(n.ports, k)
			}
		} else {
			ips[hp.ip] += d
		}
	}
}

func (n *NodeInfo) countOwner(id uint32, d int32) {
	for i := range n.owners {
		if o := &n.owners[i]; o.id == id {
			if o.n += d; o.n == 0 {
				last := len(n.owners) - 1
				n.owners[i] = n.owners[last]
				n.owners = n.owners[:last]
			}
			return
		}
	}
	n.owners = append(n.owners, ownerCount{id: id, n: d})
}

// ownerPods is how many of the node's pods the owner numbered id has.
func (n *NodeInfo) ownerPods(id uint32) int32 {
	for _, o := range n.owners {
		if o.id == id {
			return o.n
		}
	}
	return 0
}

// portsConflict: the same protocol and port conflict when either side binds every address
// or both bind the same one.
func (n *NodeInfo) portsConflict(want []hostPort) bool {
	for _, hp := range want {
		ips := n.ports[portKey{hp.protocol, hp.port}]
		if len(ips) == 0 {
			continue
		}
		if hp.ip == anyIP || ips[anyIP] > 0 || ips[hp.ip] > 0 {
			return true
		}
	}
	return false
}
