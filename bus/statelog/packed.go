package statelog

import (
	"bytes"
	"fmt"
	"strings"
	"sync"

	"github.com/klauspost/compress/s2"
)

// packer keeps a view's live values compressed (Config.PackValues). Objects of one kind share
// most of their bytes (field names, labels, defaults), so each kind's first values, up to
// dictSeed bytes, become an S2 dictionary that its later values are encoded against: a
// Service's or an EndpointSlice's JSON of ~900 bytes packs to ~100. A value is unpacked only
// when read back (a snapshot, Get, List, the previous value of an update or delete event).
type packer struct {
	mu      sync.RWMutex
	kinds   map[string]*kindDict // by kind: the key up to its second "/"
	scratch []byte               // encode buffer; pack runs under the view's write lock
}

// kindDict is a kind's dictionary, or the values that will seed it.
type kindDict struct {
	seed []byte
	dict *s2.Dict
}

// dictSeed is how much of a kind's first values its dictionary holds: several objects, so
// that the cluster's own first ones (the kubernetes Service) do not make it alone.
const dictSeed = 16 << 10

func newPacker() *packer { return &packer{kinds: map[string]*kindDict{}} }

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
	if k := p.kinds[kind]; k != nil {
		return k.dict
	}
	return nil
}

// pack returns value's packed form and whether it is packed; the values that seed their
// kind's dictionary stay as they are. Call under the view's write lock.
func (p *packer) pack(key string, value []byte) ([]byte, bool) {
	kind := kindOf(key)
	d := p.dict(kind)
	if d == nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		k := p.kinds[kind]
		if k == nil {
			k = &kindDict{}
			p.kinds[kind] = k
		}
		if k.seed = append(k.seed, value...); len(k.seed) >= dictSeed {
			k.dict, k.seed = s2.MakeDict(k.seed, nil), nil
		}
		return value, false
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
