package framework

import (
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
)

// Snapshot is a read-only view of the cache for one scheduling cycle.
type Snapshot struct {
	chunks   []*chunk
	n        int
	wideAnti bool           // some pod has anti-affinity on a key other than the hostname
	anyAnti  bool           // some pod has required anti-affinity
	rot      *atomic.Uint64 // where the next cycle starts evaluating nodes
	intern   *interner
}

// NewSnapshot builds a snapshot straight from objects (tests, tools); pods with a nodeName
// are counted on their node.
func NewSnapshot(nodes []*v1.Node, pods []*v1.Pod) *Snapshot {
	c := NewCache()
	for _, n := range nodes {
		c.UpsertNode(n)
	}
	for _, p := range pods {
		c.AddPod(p)
	}
	return c.Snapshot()
}

// NumNodes returns the number of candidate nodes.
func (s *Snapshot) NumNodes() int { return s.n }

func (s *Snapshot) node(i int) *NodeInfo { return s.chunks[i>>chunkBits][i&chunkMask] }

// NodeInfos returns the node infos in evaluation order; callers must not modify them.
func (s *Snapshot) NodeInfos() []*NodeInfo {
	out := make([]*NodeInfo, s.n)
	for i := range out {
		out[i] = s.node(i)
	}
	return out
}

// Get returns the node info of name, or nil. It is a linear scan, meant for tests and tools.
func (s *Snapshot) Get(name string) *NodeInfo {
	for i := 0; i < s.n; i++ {
		if ni := s.node(i); ni.node.Name == name {
			return ni
		}
	}
	return nil
}
