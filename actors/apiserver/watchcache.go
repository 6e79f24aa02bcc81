package apiserver

import (
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/schemas"
)

// defaultSharedEventBytes bounds the memory of recently watched objects kept decoded and
// encoded: as many JSON-watched pod events as the former bound (64 MiB of 8× the stored
// value each, decode and JSON together) kept, now that each encoding is charged as made.
const defaultSharedEventBytes = 46 << 20

// sharedEvents memoises, per stored revision, the decoded object, its selectable fields and
// its encodings (JSON, the protobuf envelope for built-in kinds, and the metadata alone in
// either), so that N watchers of one event decode it and encode it in each format once, not
// N times (kube-apiserver's watch cache does the same with its cachingObject). Selectors still
// run per watcher, on the shared object, which nobody may modify. Each encoding is made only
// when a watcher of its format asks for it, so an event nobody watches in protobuf never holds
// a protobuf copy.
//
// The oldest entries go first once over the byte bound; a watcher still holding one keeps
// using it, and one far behind decodes again.
type sharedEvents struct {
	mu      sync.Mutex
	entries map[eventKey]*sharedEvent
	order   []eventKey // insertion order, for eviction
	bytes   int
	limit   int
	// encodes and decodes count object encodings (JSON or protobuf) and decodings (test hooks:
	// once per event and format, however many watch or read it).
	encodes, decodes atomic.Int64
}

// eventKey names a stored value: a revision holds one write of one key, so of one kind. A
// delete's revision holds the key's last value.
type eventKey struct {
	kind *schemas.Kind
	rev  uint64
}

type sharedEvent struct {
	key  eventKey
	cost int // under sharedEvents.mu

	decode sync.Once
	obj    runtime.Object
	err    error

	fieldsOnce sync.Once
	fields     fields.Set

	encodings [numEncodings]sharedEncoding
}

// sharedEncoding is one encoding of an event, made once when a watcher of its format asks.
type sharedEncoding struct {
	once sync.Once
	data []byte
	err  error
}

func newSharedEvents(limit int) *sharedEvents {
	return &sharedEvents{entries: map[eventKey]*sharedEvent{}, limit: limit}
}

// sharedCost bounds the memory of an entry's decode from above: a running pod's protobuf value
// of 2.3 KB decodes to about 7.3 KB; a kind stored as JSON (custom resources) takes less for
// its size. Each encoding is charged its length when made (a pod's JSON 3.9 KB, its protobuf
// 2.3 KB), so an event watched in both formats counts both and the bound holds for both.
func sharedCost(size int) int { return 4*size + 512 }

// object is the stored value at rev, decoded once for every watcher.
func (c *sharedEvents) object(k *schemas.Kind, value []byte, rev uint64) (*sharedEvent, error) {
	e := c.entry(eventKey{k, rev}, len(value))
	e.decode.Do(func() {
		c.decodes.Add(1)
		e.obj, e.err = decodeStored(k, value, rev)
	})
	return e, e.err
}

// DecodeShared is the value of kind k stored at rev as the watch cache decodes it for its
// watchers and the update path (once), for the process's informers (informer.SharedDecoder):
// shared, so nobody may modify it.
func (s *Server) DecodeShared(k *schemas.Kind, value []byte, rev uint64) (runtime.Object, error) {
	e, err := s.events.object(k, value, rev)
	if err != nil {
		return nil, err
	}
	if s.shared != nil {
		m := mustMeta(e.obj)
		s.shared.saw(schemas.StorageKey(k, m.GetNamespace(), m.GetName()), rev, e.obj)
	}
	return e.obj, nil
}

func (c *sharedEvents) entry(key eventKey, size int) *sharedEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		return e
	}
	e := &sharedEvent{key: key, cost: sharedCost(size)}
	c.entries[key] = e
	c.order = append(c.order, key)
	c.bytes += e.cost
	c.evictLocked()
	return e
}

// charge adds n bytes (an encoding just made) to e's cost, if e is still kept.
func (c *sharedEvents) charge(e *sharedEvent, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[e.key] != e {
		return // evicted: its watchers still hold it, the bound no longer counts it
	}
	e.cost += n
	c.bytes += n
	c.evictLocked()
}

// evictLocked drops the oldest entries, but the newest, while over the bound.
func (c *sharedEvents) evictLocked() {
	n := 0
	for c.bytes > c.limit && n < len(c.order)-1 {
		c.bytes -= c.entries[c.order[n]].cost
		delete(c.entries, c.order[n])
		n++
	}
	if n > 0 {
		clear(c.order[:n])
		c.order = c.order[n:]
	}
}

// selectable is the object's field set for field selectors, computed once.
func (e *sharedEvent) selectable() fields.Set {
	e.fieldsOnce.Do(func() { e.fields = objectFields(e.obj) })
	return e.fields
}

// encoded is the object in encoding how, encoded once; it is shared and must not be modified.
func (c *sharedEvents) encoded(e *sharedEvent, how encoding) ([]byte, error) {
	enc := &e.encodings[how]
	enc.once.Do(func() {
		c.encodes.Add(1)
		enc.data, enc.err = encodeAs(e.obj, how)
		c.charge(e, len(enc.data))
	})
	return enc.data, enc.err
}
