package statelog

import (
	"fmt"
	"strings"
	"sync"

	"github.com/klauspost/compress/s2"
)

// Every view keeps values packed: its live values and its history's were the apiserver's
// largest heap item (~95 MB at 10,000 pods and 5,000 nodes) and, in a node agent, most of
// what cluster DNS costs. A kept value is a tag byte and then the value as written or an S2
// block. Objects of one kind share most of their bytes (field names, labels, defaults,
// managedFields), so each kind's first values, up to dictSeed bytes, become an S2 dictionary
// that its later values are encoded against: a ~900-byte Service packs to ~110 bytes, an
// 820-byte node Lease to ~63. Values are unpacked where they leave the view
// (Get, List, snapshots, replays, exact lists, an event's previous value), never under the
// view's write lock; the event a write hands its live watchers carries the value as written.
const (
	keptPlain byte = 0 // the value follows as written
	keptDict  byte = 1 // an S2 block against the kind's dictionary follows
)

// dictSeed is how much of a kind's first values its dictionary holds: several objects, so
// that the cluster's own first ones (the kubernetes Service) do not make it alone.
const dictSeed = 16 << 10

// packer packs one view's values. keep runs on the applier alone (under Log.applyMu);
// unpack runs on any reader.
type packer struct {
	mu      sync.RWMutex
	kinds   map[string]*kindDict // by kind: the key up to its second "/"
	scratch []byte               // keep's encode buffer
}

// kindDict is a kind's dictionary, or the values that will seed it.
type kindDict struct {
	seed []byte
	dict *s2.Dict
}

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

// keep is value's kept form, in a slice of its own (nil stays nil): the value may share the
// buffer its message arrived in, which must not stay alive with it.
func (p *packer) keep(key string, value []byte) []byte {
	if value == nil {
		return nil
	}
	kind := kindOf(key)
	d := p.dict(kind)
	if d == nil {
		p.seed(kind, value)
		return tagged(keptPlain, value)
	}
	if need := s2.MaxEncodedLen(len(value)); need > cap(p.scratch) {
		p.scratch = make([]byte, need)
	}
	enc := d.Encode(p.scratch[:cap(p.scratch)], value)
	if len(enc) >= len(value) {
		return tagged(keptPlain, value) // too small or too unlike its kind to gain
	}
	return tagged(keptDict, enc)
}

// tagged is tag followed by b, in a new slice of just that size.
func tagged(tag byte, b []byte) []byte {
	return append(append(make([]byte, 0, 1+len(b)), tag), b...)
}

// seed adds value to its kind's dictionary seed, and makes the dictionary once it is full.
func (p *packer) seed(kind string, value []byte) {
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
}

// unpack is the value a kept form holds: a plain one shares its bytes, a packed one is
// decoded into a new slice. The view made those bytes itself, so a failure is a broken
// invariant, not bad input.
func (p *packer) unpack(key string, kept []byte) []byte {
	if len(kept) == 0 {
		return nil
	}
	if kept[0] == keptPlain {
		return kept[1:]
	}
	d := p.dict(kindOf(key))
	if d == nil {
		panic(fmt.Sprintf("statelog: packed value of %s without its kind's dictionary", key))
	}
	out, err := d.Decode(nil, kept[1:])
	if err != nil {
		panic(fmt.Sprintf("statelog: unpack %s: %v", key, err))
	}
	return out
}

// entry is the live entry an item keeps, with its value unpacked.
func (v *view) entry(it *item) Entry {
	e := it.e
	e.Value = v.packer.unpack(it.key, e.Value)
	return e
}

// event is a history event with its values unpacked.
func (v *view) event(ev *Event) Event {
	out := *ev
	out.Value = v.packer.unpack(ev.Key, ev.Value)
	if len(ev.PrevValue) > 0 && len(ev.Value) > 0 && &ev.PrevValue[0] == &ev.Value[0] {
		out.PrevValue = out.Value // a delete's: one unpack for both
	} else {
		out.PrevValue = v.packer.unpack(ev.Key, ev.PrevValue)
	}
	return out
}
