package statelog

import (
	"bytes"
	"fmt"
	"strings"
	"sync"

	"github.com/klauspost/compress/s2"
)

// packer keeps a view's live values compressed (Config.PackValues). Objects of one kind share
// most of their bytes (field names, labels, defaults), so each kind's first value is kept as
// an S2 dictionary that later values of the kind are encoded against: a Service's or an
// EndpointSlice's JSON of ~900 bytes packs to ~100. A value is unpacked only when read back
// (a snapshot, Get, List, the previous value of an update or delete event).
type packer struct {
	mu      sync.RWMutex
	dicts   map[string]*s2.Dict // by kind: the key up to its second "/"
	scratch []byte              // encode buffer; pack runs under the view's write lock
}

func newPacker() *packer { return &packer{dicts: map[string]*s2.Dict{}} }

// kindOf is the key's first two tokens ("core/services/" of "core/services/ns/name").
func kindOf(key string) string {
	i := strings.IndexByte(key, '/')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '/')
	if j < 0 {
		return key
	}
	return key[:i+1+j+1]
}

func (p *packer) dict(kind string) *s2.Dict {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.dicts[kind]
}

// pack returns value's packed form and whether it is packed; a value too short to seed its
// kind's dictionary stays as it is. Call under the view's write lock.
func (p *packer) pack(key string, value []byte) ([]byte, bool) {
	kind := kindOf(key)
	d := p.dict(kind)
	if d == nil {
		if len(value) < s2.MinDictSize {
			return value, false
		}
		d = s2.MakeDict(bytes.Clone(value), nil)
		if d == nil {
			return value, false
		}
		p.mu.Lock()
		p.dicts[kind] = d
		p.mu.Unlock()
	}
	if need := s2.MaxEncodedLen(len(value)); need > cap(p.scratch) {
		p.scratch = make([]byte, need)
	}
	// Encode writes into the scratch buffer sized for the worst case; the view keeps a copy
	// of just the packed bytes.
	return bytes.Clone(d.Encode(p.scratch[:cap(p.scratch)], value)), true
}

// unpack returns the value pack packed. The view made those bytes itself, so a failure is a
// broken invariant, not bad input.
func (p *packer) unpack(key string, packed []byte) []byte {
	d := p.dict(kindOf(key))
	if d == nil {
		panic(fmt.Sprintf("statelog: packed value of %s without its kind's dictionary", key))
	}
	out, err := d.Decode(nil, packed)
	if err != nil {
		panic(fmt.Sprintf("statelog: unpack %s: %v", key, err))
	}
	return out
}

// entry is it's Entry with its value as written.
func (v *view) entry(it *item) Entry {
	if !it.packed {
		return it.e
	}
	e := it.e
	e.Value = v.packer.unpack(it.key, it.e.Value)
	return e
}

// newItem is the live item of a write, its value packed if the view packs values.
func (v *view) newItem(key string, seq uint64, value []byte, h Header) *item {
	it := &item{key: key, e: Entry{Key: key, Rev: seq, Value: value, Header: h}}
	if v.packer != nil && value != nil {
		it.e.Value, it.packed = v.packer.pack(key, value)
	}
	return it
}
