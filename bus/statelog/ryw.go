package statelog

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ownWrites keeps read-your-writes without a read-back per write. A write returns as soon as
// JetStream acknowledged it and records its revision here; only a read that could see one of
// those writes before the view applied it (the same key, or a list or watch over it) waits
// for the view, which has usually applied it by then. Reads of other keys never wait, so
// concurrent writers do not queue behind each other's read-backs.
type ownWrites struct {
	acked atomic.Uint64 // the highest revision a write of this Log was acknowledged at
	n     atomic.Int32  // len(keys): the apply path skips the lock when nothing is pending
	mu    sync.Mutex
	keys  map[string]uint64 // key -> highest acknowledged revision the view may not have yet
}

// revWait bounds how long Rev waits for the view to apply this Log's acknowledged writes.
const revWait = 10 * time.Second

// noteAcked records that a write of key ("" for one outside the key space) was acknowledged
// at rev.
func (l *Log) noteAcked(key string, rev uint64) {
	o := &l.own
	for cur := o.acked.Load(); rev > cur && !o.acked.CompareAndSwap(cur, rev); cur = o.acked.Load() {
	}
	if key == "" {
		return
	}
	o.mu.Lock()
	if rev > o.keys[key] {
		o.keys[key] = rev
	}
	o.n.Store(int32(len(o.keys)))
	o.mu.Unlock()
	// The view may have applied rev before it was recorded; settle it here then, since the
	// apply path looked before the record existed.
	if l.applied() >= rev {
		l.settle(key, rev)
	}
}

// settle forgets key's pending write once the view has applied rev. The view raises its
// revision before it calls settle, and noteAcked records before it reads the revision, so
// one of the two always sees the other.
func (l *Log) settle(key string, rev uint64) {
	o := &l.own
	if o.n.Load() == 0 {
		return
	}
	o.mu.Lock()
	if r, ok := o.keys[key]; ok && r <= rev {
		delete(o.keys, key)
		o.n.Store(int32(len(o.keys)))
	}
	o.mu.Unlock()
}

// sweep drops pending writes the view has passed without settling them: a message compacted
// away before this view read it advances the revision without naming its key.
func (l *Log) sweep() {
	o := &l.own
	if o.n.Load() == 0 {
		return
	}
	applied := l.applied()
	o.mu.Lock()
	for k, r := range o.keys {
		if r <= applied {
			delete(o.keys, k)
		}
	}
	o.n.Store(int32(len(o.keys)))
	o.mu.Unlock()
}

// ownUnder is the highest acknowledged revision of this Log's writes to keys starting with
// prefix that the view has not applied yet (0: none). An exact key is a prefix of itself
// only, so it matches no other key.
func (l *Log) ownUnder(prefix string, exact bool) uint64 {
	o := &l.own
	if o.n.Load() == 0 {
		return 0
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if exact {
		return o.keys[prefix]
	}
	var top uint64
	for k, r := range o.keys {
		if r > top && strings.HasPrefix(k, prefix) {
			top = r
		}
	}
	return top
}

// waitOwn waits until the view holds this Log's acknowledged writes of key (exact) or under
// a prefix; it costs two atomic loads when there are none.
func (l *Log) waitOwn(ctx context.Context, prefix string, exact bool) error {
	if rev := l.ownUnder(prefix, exact); rev > l.applied() {
		return l.waitForExisting(ctx, rev)
	}
	return nil
}

// Rev is the revision the view has applied. It includes every write this Log has been
// acknowledged for: when the view has not applied one yet, Rev waits for it (at most
// revWait, then it answers what the view has).
func (l *Log) Rev() uint64 {
	if acked := l.own.acked.Load(); acked > l.applied() {
		ctx, cancel := context.WithTimeout(context.Background(), revWait)
		_ = l.waitForExisting(ctx, acked)
		cancel()
	}
	return l.applied()
}

// applied is the revision the view has applied, without waiting for anything.
func (l *Log) applied() uint64 {
	l.view.mu.RLock()
	defer l.view.mu.RUnlock()
	return l.view.rev
}
