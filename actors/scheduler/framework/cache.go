package framework

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
)

// DefaultAssumeTTL is how long an assumed pod counts on its node without the bound pod
// arriving from the state log. It runs from Assume, so it covers the bind round trip too.
const DefaultAssumeTTL = 30 * time.Second

// ErrNoLongerFits is returned by Assume when the node filled up since the snapshot.
var ErrNoLongerFits = errors.New("pod no longer fits the node")

// Cache holds the nodes and the pods counted against them. It is safe for concurrent use.
type Cache struct {
	mu  sync.Mutex
	ttl time.Duration
	now func() time.Time

	nodes map[string]*nodeEntry
	// The nodes with a node object, in snapshot order, as fixed-size chunks so that a
	// change copies one chunk and the chunk index, never the whole list.
	chunks     []*chunk
	chunkEpoch []uint64
	listEpoch  uint64
	numListed  int
	intern     *interner
	pods       map[string]*podState
	assumed    map[string]*podState
	nextSweep  time.Time
	wideAnti   int // pods whose anti-affinity spans more than one node
	anyAnti    int // pods with required anti-affinity

	// epoch grows with every new snapshot; NodeInfos and the list from an older epoch may
	// be shared with a snapshot and are copied before a change.
	epoch   uint64
	last    *Snapshot // returned again while nothing changed
	changed bool
	rot     atomic.Uint64
}

type nodeEntry struct {
	info *NodeInfo
	idx  int // position in list, -1 when the node object is gone but pods remain
}

type podState struct {
	pi       *podInfo
	node     string
	assumed  bool
	deadline time.Time
}

// NewCache returns an empty cache whose assumptions expire after DefaultAssumeTTL.
func NewCache() *Cache {
	return &Cache{
		ttl:     DefaultAssumeTTL,
		now:     time.Now,
		nodes:   map[string]*nodeEntry{},
		pods:    map[string]*podState{},
		assumed: map[string]*podState{},
		intern:  newInterner(),
		epoch:   1,
	}
}

// SetAssumeTTL changes how long later assumptions live unconfirmed.
func (c *Cache) SetAssumeTTL(d time.Duration) {
	c.mu.Lock()
	c.ttl = d
	c.mu.Unlock()
}

// Counts returns the number of nodes (with a node object), counted pods and, of those,
// pods that are only assumed.
func (c *Cache) Counts() (nodes, pods, assumed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
	return c.numListed, len(c.pods), len(c.assumed)
}

// UpsertNode adds a node or replaces its object, keeping the pods counted on it.
func (c *Cache) UpsertNode(n *v1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.nodes[n.Name]
	if e == nil {
		e = &nodeEntry{info: newNodeInfo(c.epoch), idx: -1}
		c.nodes[n.Name] = e
	}
	ni := c.mutableLocked(e)
	ni.setNode(n)
	if e.idx < 0 {
		e.idx = c.numListed
		c.numListed++
		c.setListedLocked(e.idx, ni)
	}
}

// DeleteNode removes a node. Pods still bound to it stay counted (their deletions follow)
// but the node is no longer a candidate.
func (c *Cache) DeleteNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.nodes[name]
	if e == nil {
		return
	}
	if e.idx >= 0 {
		last := c.numListed - 1
		moved := c.chunks[last>>chunkBits][last&chunkMask]
		c.setListedLocked(e.idx, moved)
		c.nodes[moved.node.Name].idx = e.idx
		c.setListedLocked(last, nil)
		c.numListed--
		if keep := (c.numListed + chunkMask) >> chunkBits; keep < len(c.chunks) {
			c.chunks, c.chunkEpoch = c.chunks[:keep], c.chunkEpoch[:keep]
		}
		e.idx = -1
	}
	if len(e.info.pods) == 0 {
		delete(c.nodes, name)
		return
	}
	c.mutableLocked(e).node = nil
}

// AddPod counts a bound pod on its node. If the pod was assumed, this confirms it: the
// assumption is replaced, never added to.
func (c *Cache) AddPod(p *v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(p)
}

// UpdatePod applies a change to a pod; a terminal pod stops counting.
func (c *Cache) UpdatePod(old, p *v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old != nil && podKey(old) != podKey(p) {
		c.dropLocked(podKey(old))
	}
	c.putLocked(p)
}

// RemovePod stops counting a pod, assumed or bound.
func (c *Cache) RemovePod(p *v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(podKey(p))
}

// Assume counts pod on node before the bind is confirmed, so that the next scheduling
// cycle already sees the space taken.
func (c *Cache) Assume(p *v1.Pod, node string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
	key := podKey(p)
	if _, ok := c.pods[key]; ok {
		return fmt.Errorf("pod %s/%s is already counted on a node", p.Namespace, p.Name)
	}
	e := c.nodes[node]
	if e == nil || e.info.node == nil {
		return fmt.Errorf("node %q is not in the cache", node)
	}
	cp := *p
	cp.Spec.NodeName = node
	st := &podState{pi: newPodInfo(&cp), node: node, assumed: true, deadline: c.now().Add(c.ttl)}
	// Re-check what can run out, so that cycles on stale snapshots never overbook a node.
	if r := (&Cycle{pod: &cp, pi: st.pi}).fits(e.info, nil); len(r) > 0 {
		return fmt.Errorf("%w: %s", ErrNoLongerFits, r[0])
	}
	if e.info.portsConflict(st.pi.ports) {
		return fmt.Errorf("%w: %s", ErrNoLongerFits, reasonNodePorts)
	}
	c.addLocked(st)
	c.assumed[key] = st
	if c.nextSweep.IsZero() || st.deadline.Before(c.nextSweep) {
		c.nextSweep = st.deadline
	}
	return nil
}

// Renew restarts an assumption's TTL: a pod whose binding cycle waits (for its volumes, say)
// keeps counting on its node, as kube-scheduler's assumptions do until binding finishes.
func (c *Cache) Renew(p *v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.assumed[podKey(p)]; ok {
		st.deadline = c.now().Add(c.ttl)
	}
}

// Forget drops an assumption whose bind failed. A pod already confirmed stays.
func (c *Cache) Forget(p *v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.pods[podKey(p)]; ok && st.assumed {
		c.dropLocked(st.pi.key)
	}
}

// Snapshot returns a consistent read-only view. It copies nothing per node: node infos
// changed since the last snapshot were already copied on write.
func (c *Cache) Snapshot() *Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
	if c.last != nil && !c.changed {
		return c.last
	}
	c.last = &Snapshot{chunks: c.chunks, n: c.numListed, wideAnti: c.wideAnti > 0, anyAnti: c.anyAnti > 0, rot: &c.rot, intern: c.intern}
	// Everything reachable from the snapshot now belongs to it.
	c.epoch++
	c.changed = false
	return c.last
}

func (c *Cache) putLocked(p *v1.Pod) {
	key := podKey(p)
	st, ok := c.pods[key]
	if p.Spec.NodeName == "" {
		if ok && !st.assumed {
			c.dropLocked(key) // unbound again: no longer on a node
		}
		return // an update of a pod still being scheduled keeps its assumption
	}
	if ok {
		c.dropLocked(key)
	}
	if terminal(p) {
		return
	}
	c.addLocked(&podState{pi: newPodInfo(p), node: p.Spec.NodeName})
}

func (c *Cache) addLocked(st *podState) {
	e := c.nodes[st.node]
	if e == nil {
		// The pod arrived before its node: keep its count for when the node shows up.
		e = &nodeEntry{info: newNodeInfo(c.epoch), idx: -1}
		e.info.hostname = st.node
		c.nodes[st.node] = e
	}
	st.pi.labelIDs = c.intern.podLabels(st.pi.pod)
	st.pi.ownerID = c.intern.owner(st.pi.owner)
	c.mutableLocked(e).addPod(st.pi)
	c.pods[st.pi.key] = st
	c.countAnti(st.pi, 1)
}

func (c *Cache) dropLocked(key string) {
	st, ok := c.pods[key]
	if !ok {
		return
	}
	delete(c.pods, key)
	delete(c.assumed, key)
	c.countAnti(st.pi, -1)
	e := c.nodes[st.node]
	if e == nil {
		return
	}
	c.mutableLocked(e).removePod(key)
	if e.idx < 0 && len(e.info.pods) == 0 {
		delete(c.nodes, st.node)
	}
}

func (c *Cache) expireLocked() {
	if len(c.assumed) == 0 || c.now().Before(c.nextSweep) {
		return
	}
	now := c.now()
	c.nextSweep = time.Time{}
	for key, st := range c.assumed {
		if !now.Before(st.deadline) {
			c.dropLocked(key)
			continue
		}
		if c.nextSweep.IsZero() || st.deadline.Before(c.nextSweep) {
			c.nextSweep = st.deadline
		}
	}
}

// mutableLocked returns a NodeInfo of e that no snapshot shares, copying it if needed.
func (c *Cache) mutableLocked(e *nodeEntry) *NodeInfo {
	c.changed = true
	if e.info.epoch == c.epoch {
		return e.info
	}
	e.info = e.info.clone(c.epoch)
	if e.idx >= 0 {
		c.setListedLocked(e.idx, e.info)
	}
	return e.info
}

const (
	chunkBits = 6
	chunkMask = 1<<chunkBits - 1
)

type chunk [1 << chunkBits]*NodeInfo

// setListedLocked puts ni at position i of the node list (i may be one past the end),
// copying the chunk index and the chunk when a snapshot shares them.
func (c *Cache) setListedLocked(i int, ni *NodeInfo) {
	c.changed = true
	if c.listEpoch != c.epoch {
		c.chunks = append(make([]*chunk, 0, len(c.chunks)+1), c.chunks...)
		c.listEpoch = c.epoch
	}
	ci := i >> chunkBits
	switch {
	case ci == len(c.chunks):
		c.chunks = append(c.chunks, new(chunk))
		c.chunkEpoch = append(c.chunkEpoch, c.epoch)
	case c.chunkEpoch[ci] != c.epoch:
		cp := *c.chunks[ci]
		c.chunks[ci] = &cp
		c.chunkEpoch[ci] = c.epoch
	}
	c.chunks[ci][i&chunkMask] = ni
}

func (c *Cache) countAnti(pi *podInfo, d int) {
	if len(pi.anti) > 0 {
		c.anyAnti += d
	}
	if spansNodes(pi) {
		c.wideAnti += d
	}
}

// spansNodes: anti-affinity on any key but the hostname reaches beyond the pod's own node.
func spansNodes(pi *podInfo) bool {
	for i := range pi.anti {
		if pi.anti[i].topologyKey != hostnameKey {
			return true
		}
	}
	return false
}
