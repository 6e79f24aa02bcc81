package statelog

import (
	"context"
	"slices"
	"sort"
	"strings"
)

// ListAt returns the entries under prefix as they were at revision rev (Kubernetes'
// resourceVersionMatch=Exact), rebuilt from the live keys by undoing the history after rev.
// It waits for the view to reach rev as List with MinRev does, and answers ErrExpired when
// the history no longer reaches back to rev (compacted, or let go of by the size bound).
// Entries rebuilt from history carry no Header.
func (l *Log) ListAt(ctx context.Context, prefix string, rev uint64) ([]Entry, error) {
	if err := l.mustHold(prefix); err != nil {
		return nil, err
	}
	if err := l.waitRead(ctx, ReadOptions{MinRev: rev}, l.ownUnder(prefix, false)); err != nil {
		return nil, err
	}
	es, ok := l.view.listAt(prefix, rev)
	if !ok {
		return nil, ErrExpired
	}
	return es, nil
}

// Applied is the revision the view has applied, without waiting for anything.
func (l *Log) Applied() uint64 { return l.applied() }

func (v *view) listAt(prefix string, rev uint64) ([]Entry, bool) {
	v.mu.RLock()
	if rev < v.oldestWatchRev() {
		v.mu.RUnlock()
		return nil, false
	}
	items := v.itemsLocked(prefix)
	// The first event of a key after rev holds the key's state at rev: its previous value,
	// or none for a create. Copies: the history's slots are cleared as it is trimmed.
	first := map[string]Event{}
	i := sort.Search(len(v.history), func(i int) bool { return v.history[i].Rev > rev })
	for j := i; j < len(v.history); j++ {
		ev := v.history[j]
		if _, seen := first[ev.Key]; !seen && strings.HasPrefix(ev.Key, prefix) {
			first[ev.Key] = ev
		}
	}
	v.mu.RUnlock()
	// Values are unpacked after the lock, so a long list does not hold up the applier.
	live := v.entries(items)
	if len(first) == 0 {
		return live, true
	}
	out := make([]Entry, 0, len(live)+len(first))
	for _, e := range live {
		if _, changed := first[e.Key]; !changed {
			out = append(out, e)
		}
	}
	for key, ev := range first {
		if ev.PrevRev != 0 {
			out = append(out, Entry{Key: key, Rev: ev.PrevRev, Value: v.packer.unpack(key, ev.PrevValue)})
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
	return out, true
}
