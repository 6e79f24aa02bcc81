package statelog

import (
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/btree"
)

// item is a live key; e.Value is its kept form (packed.go): read it through view.entry.
// Items are never changed once in the tree (a write inserts a new one), so a reader may use
// one after the lock.
type item struct {
	key string
	e   Entry
}

func lessItem(a, b *item) bool { return a.key < b.key }

// view is the in-memory state built from the stream: live keys, tombstones
// still in the stream (a re-create must CAS on them), and the event history
// since the compaction mark (the watch cache), at most historyLimit bytes of it. Live and
// history values are kept packed (packed.go).
type view struct {
	mu        sync.RWMutex
	rev       uint64
	compacted uint64
	live      *btree.BTreeG[*item] // in key order, for prefix lists
	byKey     map[string]*item     // the same items: a write's and a get's lookup is one hash, not a descent
	tombs     map[string]uint64
	history   []Event // values and previous values in their kept form: read through view.event
	watchers  map[*Watcher]struct{}
	changed   chan struct{} // closed and replaced whenever rev advances

	historyBytes int64 // what history holds, by eventCost
	historyLimit int64
	// trimmed is the newest revision the size bound let go of: a watch must start at or
	// after it. trimmedKeys has, per key, its newest write let go of since the last
	// compaction mark: the compaction plan still needs it (compactPlan).
	trimmed     uint64
	trimmedKeys map[string]trimmedWrite

	packer *packer
}

type trimmedWrite struct {
	rev uint64
	del bool
}

func newView(cfg Config) *view {
	v := &view{
		live:         btree.NewG(32, lessItem),
		byKey:        map[string]*item{},
		tombs:        map[string]uint64{},
		watchers:     map[*Watcher]struct{}{},
		changed:      make(chan struct{}),
		historyLimit: cfg.HistoryBytes,
		packer:       newPacker(),
	}
	// Only a view that can plan a compaction (Compact refuses read-only and filtered ones)
	// needs the writes its history let go of.
	if !cfg.ReadOnly && len(cfg.Only) == 0 {
		v.trimmedKeys = map[string]trimmedWrite{}
	}
	return v
}

// addWatcher and removeWatcher keep the watcher set and its gauge together; call under mu.
func (v *view) addWatcher(w *Watcher) {
	v.watchers[w] = struct{}{}
	watchersRegistered.Inc()
}

func (v *view) removeWatcher(w *Watcher) {
	if _, ok := v.watchers[w]; ok {
		delete(v.watchers, w)
		watchersRegistered.Dec()
	}
}

// eventOverhead approximates what an event costs besides its key, values and header: the
// Event in the history slice.
const eventOverhead = 160

// headerFieldSize is what a header field costs besides its value (its name is shared).
const headerFieldSize = 32

// eventCost is what an event keeps in memory. A previous value is often shared with the
// previous event of the key; counting it anyway keeps the bound an upper bound.
func eventCost(ev *Event) int64 {
	n := eventOverhead + len(ev.Key) + len(ev.Value)
	if len(ev.PrevValue) > 0 && (len(ev.Value) == 0 || &ev.PrevValue[0] != &ev.Value[0]) {
		n += len(ev.PrevValue)
	}
	for _, f := range ev.Header {
		n += headerFieldSize + len(f.Value)
	}
	return int64(n)
}

// appendHistory records ev and, over the byte bound, lets go of the oldest events.
func (v *view) appendHistory(ev Event) {
	v.history = append(v.history, ev)
	v.historyBytes += eventCost(&ev)
	n := 0
	for excess := v.historyBytes - v.historyLimit; excess > 0 && n < len(v.history); n++ {
		excess -= eventCost(&v.history[n])
	}
	if n > 0 {
		historyTrimmed.Add(float64(n))
		v.letGo(n)
	}
}

// letGo forgets the n oldest events before compaction would: a watch must start after them,
// and a compaction plan still counts their keys' writes.
func (v *view) letGo(n int) {
	for _, old := range v.history[:n] {
		v.trimmed = old.Rev
		if v.trimmedKeys != nil {
			v.trimmedKeys[old.Key] = trimmedWrite{rev: old.Rev, del: old.Type == EventDelete}
		}
	}
	v.dropHistory(n)
}

// startHistory lets go of every event in the history (Config.HistoryFromOpen).
func (v *view) startHistory() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if n := len(v.history); n > 0 {
		v.letGo(n)
		v.history = nil // the emptied array too
	}
}

// dropHistory forgets the n oldest events, clearing them so their values can be freed.
func (v *view) dropHistory(n int) {
	for i := range n {
		v.historyBytes -= eventCost(&v.history[i])
		v.history[i] = Event{}
	}
	v.history = v.history[n:]
}

// oldestWatchRev is the lowest revision a watch may start from: below it, events are gone
// (compacted, or let go of by the size bound).
func (v *view) oldestWatchRev() uint64 { return max(v.compacted, v.trimmed) }

func (v *view) advance(seq uint64) {
	v.rev = seq
	close(v.changed)
	v.changed = make(chan struct{})
}

// applyKey applies one key message at stream sequence seq: value as written (for the live
// watchers) and packed (for the view). It returns the event and the watchers that could not
// take it at once (fanout). Only the applier (under Log.applyMu) changes the live keys and
// the revision, so what it reads under the read lock holds until it takes the write lock:
// the previous value is unpacked, and the new one packed, before the view is locked.
func (v *view) applyKey(seq uint64, key string, del bool, value []byte, h Header, at time.Time) (*Event, []*Watcher) {
	v.mu.RLock()
	redelivered := seq <= v.rev
	prev, had := v.byKey[key]
	v.mu.RUnlock()
	if redelivered {
		return nil, nil // after a consumer reset; not packed, so it seeds no dictionary twice
	}
	var prevValue, kept []byte
	if had {
		prevValue = v.packer.unpack(key, prev.e.Value)
	}
	if !del {
		kept = v.packer.keep(key, value)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	var ev, hev Event // as handed to the live watchers, as the history keeps it
	if del {
		if !had {
			v.tombs[key] = seq
			v.advance(seq)
			return nil, nil
		}
		v.live.Delete(prev)
		delete(v.byKey, key)
		v.tombs[key] = seq
		ev = Event{Type: EventDelete, Key: key, Rev: seq, Value: prevValue, PrevRev: prev.e.Rev, PrevValue: prevValue, Header: h, Time: at}
		hev = ev
		hev.Value, hev.PrevValue = prev.e.Value, prev.e.Value
	} else {
		delete(v.tombs, key)
		it := &item{key: key, e: Entry{Key: key, Rev: seq, Value: kept, Header: h}}
		v.live.ReplaceOrInsert(it)
		v.byKey[key] = it
		ev = Event{Type: EventPut, Key: key, Rev: seq, Value: value, Header: h, Time: at}
		hev = ev
		hev.Value = kept
		if had {
			ev.PrevRev, ev.PrevValue = prev.e.Rev, prevValue
			hev.PrevRev, hev.PrevValue = prev.e.Rev, prev.e.Value
		}
	}
	v.appendHistory(hev)
	v.advance(seq)
	return v.fanout(ev)
}

// applyOther advances the revision for a message outside the key space.
func (v *view) applyOther(seq uint64, compactTo uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if seq <= v.rev {
		return
	}
	if compactTo > v.compacted {
		v.compacted = compactTo
		v.dropHistory(sort.Search(len(v.history), func(i int) bool { return v.history[i].Rev > compactTo }))
		for k, r := range v.tombs {
			if r < compactTo {
				delete(v.tombs, k)
			}
		}
		for k, w := range v.trimmedKeys {
			if w.rev <= compactTo {
				delete(v.trimmedKeys, k)
			}
		}
	}
	v.advance(seq)
}

// fanout hands ev to every watcher of its key without blocking and returns the watchers
// whose buffer was full, for deliverBlocked. One copy of ev is shared by all of them.
func (v *view) fanout(ev Event) (*Event, []*Watcher) {
	var shared *Event
	var blocked []*Watcher
	for w := range v.watchers {
		if ev.Rev <= w.start || !strings.HasPrefix(ev.Key, w.prefix) {
			continue
		}
		if shared == nil {
			shared = &ev
		}
		select {
		case w.in <- shared:
		default:
			w.blocked.Store(true)
			blocked = append(blocked, w)
		}
	}
	return shared, blocked
}

func (v *view) bookmark() {
	v.mu.Lock()
	defer v.mu.Unlock()
	for w := range v.watchers {
		if !w.bookmarks || v.rev < w.start || w.blocked.Load() {
			continue
		}
		select {
		case w.in <- &Event{Type: EventBookmark, Rev: v.rev}:
		default: // a full buffer already carries fresher news than a bookmark
		}
	}
}

func (v *view) get(key string) (Entry, uint64, bool) {
	v.mu.RLock()
	it, ok := v.byKey[key]
	rev := v.rev
	v.mu.RUnlock()
	if !ok {
		return Entry{}, rev, false
	}
	return v.entry(it), rev, true
}

// state tells what the view knows of key: live rev, or tombstone rev.
func (v *view) state(key string) (liveRev, tombRev uint64) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if it, ok := v.byKey[key]; ok {
		return it.e.Rev, 0
	}
	return 0, v.tombs[key]
}

// list unpacks the values after the lock, so a long list does not hold up the applier.
func (v *view) list(prefix string) ([]Entry, uint64) {
	v.mu.RLock()
	items, rev := v.itemsLocked(prefix), v.rev
	v.mu.RUnlock()
	return v.entries(items), rev
}

func (v *view) itemsLocked(prefix string) []*item {
	var out []*item
	v.live.AscendGreaterOrEqual(&item{key: prefix}, func(it *item) bool {
		if !strings.HasPrefix(it.key, prefix) {
			return false
		}
		out = append(out, it)
		return true
	})
	return out
}

func (v *view) entries(items []*item) []Entry {
	out := make([]Entry, len(items))
	for i, it := range items {
		out[i] = v.entry(it)
	}
	return out
}

// compactPlan lists, per key, the sequence below which its subject can be
// purged: each key keeps its state at rev (the last write <= rev: a later
// delete event needs that value), except a tombstone below rev.
//
// Writes the size bound let go of count through trimmedKeys. A key whose newest trimmed write
// is above rev has lost its write <= rev from memory: it is left for a later compaction.
func (v *view) compactPlan(rev uint64) map[string]uint64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	plan := map[string]uint64{}
	planWrite := func(key string, at uint64, del bool) {
		if del && at < rev {
			plan[key] = at + 1
		} else {
			plan[key] = at
		}
	}
	unknown := map[string]bool{}
	for k, w := range v.trimmedKeys {
		if w.rev <= rev {
			planWrite(k, w.rev, w.del)
		} else {
			unknown[k] = true
		}
	}
	for _, ev := range v.history {
		if ev.Rev > rev {
			break
		}
		planWrite(ev.Key, ev.Rev, ev.Type == EventDelete)
	}
	// Tombstones with no delete event in this history (deleted while not
	// live, or replayed after an earlier compaction) go too.
	for k, r := range v.tombs {
		if r < rev && plan[k] <= r && !unknown[k] {
			plan[k] = r + 1
		}
	}
	return plan
}
