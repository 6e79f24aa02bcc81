package apiserver

import (
	"bytes"
	"sync"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// byContent memoises what is worked out from a managedFields set's JSON, by that JSON. Objects
// of one shape share their sets (every node's Lease has the same entry, a Deployment's pods
// nearly so), and parsing one per update took a 4 KB parser buffer and ~2% of the server's CPU
// at 500 Lease renewals a second. A cached value is shared: it may only be read. Errors are
// not kept. Once full it starts over (the shapes in use come back at once).
type byContent[V any] struct {
	mu      sync.Mutex
	entries map[string]V
}

// maxFieldSets bounds each cache.
const maxFieldSets = 1024

// lookup returns what compute makes of raw, computing it on first sight.
func (c *byContent[V]) lookup(raw []byte, compute func([]byte) (V, error)) (V, error) {
	c.mu.Lock()
	v, ok := c.entries[string(raw)]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := compute(raw)
	if err != nil {
		var zero V
		return zero, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= maxFieldSets {
		c.entries = make(map[string]V, maxFieldSets)
	}
	c.entries[string(raw)] = v
	return v, nil
}

// fieldSets memoises parsed sets; a set may only be read (Has), never changed.
type fieldSets struct{ byContent[*fieldpath.Set] }

var parsedFieldSets fieldSets

// get returns the set raw encodes, parsing it on first sight.
func (c *fieldSets) get(raw []byte) (*fieldpath.Set, error) {
	return c.lookup(raw, func(raw []byte) (*fieldpath.Set, error) {
		s := &fieldpath.Set{}
		return s, s.FromJSON(bytes.NewReader(raw))
	})
}
