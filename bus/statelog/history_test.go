package statelog

import (
	"errors"
	"fmt"
	"testing"
)

// The event history keeps to its byte bound: a watch from a revision it let go of gets
// ErrExpired (the apiserver's 410 Gone), one from the oldest kept revision gets every later
// event in order.
func TestHistoryBoundedBySize(t *testing.T) {
	e := newEnv(t)
	// Room for about eight events of this size (a put counts its previous value too).
	const limit = 8 * 2200
	l := e.open(Config{Memory: true, HistoryBytes: limit})
	c := ctx(t)
	var revs []uint64
	for i := range 40 {
		key := fmt.Sprintf("nodes/_/n%d", i%4)
		var rev uint64
		var err error
		if i < 4 {
			rev, err = l.Create(c, key, incompressible(1000), nil)
		} else {
			// New bytes each time: the bound counts what the view keeps, packed or not.
			rev, err = l.Update(c, key, incompressible(1000), revs[i-4], nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, rev)
	}
	l.Rev()
	l.view.mu.RLock()
	held, kept := l.view.historyBytes, len(l.view.history)
	l.view.mu.RUnlock()
	if held > limit || kept < 4 || kept > 16 {
		t.Fatalf("history holds %d events, %d bytes; bound %d", kept, held, limit)
	}
	oldest := l.OldestWatchRev()
	if oldest <= revs[0] || oldest >= revs[len(revs)-1] {
		t.Fatalf("oldest watchable revision %d, writes %d..%d", oldest, revs[0], revs[len(revs)-1])
	}
	if _, err := l.Watch(c, "nodes/", WatchOptions{FromRev: oldest - 1}); !errors.Is(err, ErrExpired) {
		t.Fatalf("watch from %d, below the kept history: %v", oldest-1, err)
	}
	w := must[*Watcher](t)(l.Watch(c, "nodes/", WatchOptions{FromRev: oldest}))
	defer w.Stop()
	for _, want := range revs {
		if want <= oldest {
			continue
		}
		if ev := next(t, w); ev.Rev != want || ev.PrevRev == 0 {
			t.Fatalf("replay: %+v, want rev %d (an update)", ev, want)
		}
	}
	live := must[uint64](t)(l.Update(c, "nodes/_/n0", []byte("live"), revs[36], nil))
	if ev := next(t, w); ev.Rev != live {
		t.Fatalf("after the replay: %+v, want the live rev %d", ev, live)
	}
}

// Compaction still purges what the size bound let go of from memory, and keeps every key's
// state: a fresh view replayed from the compacted stream holds exactly the same keys.
func TestCompactAfterTheHistoryWasTrimmed(t *testing.T) {
	e := newEnv(t)
	l := e.open(Config{HistoryBytes: 4000})
	c := ctx(t)
	value := incompressible(400)
	first := map[string]uint64{}
	last := map[string]uint64{}
	for round := range 5 {
		for k := range 6 {
			key := fmt.Sprintf("pods/ns/p%d", k)
			var rev uint64
			var err error
			if round == 0 {
				rev, err = l.Create(c, key, value, nil)
				first[key] = rev
			} else {
				rev, err = l.Update(c, key, value, last[key], nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			last[key] = rev
		}
	}
	gone := must[uint64](t)(l.Create(c, "pods/ns/gone", value, nil))
	tomb := must[uint64](t)(l.Delete(c, "pods/ns/gone", gone, nil))
	mid := must[uint64](t)(l.Create(c, "pods/ns/mid", value, nil))
	// p0 is written again after mid, and memory forgets that write too: its state at mid is
	// then unknown, so it keeps all of its messages until a later compaction.
	after := must[uint64](t)(l.Update(c, "pods/ns/p0", value, last["pods/ns/p0"], nil))
	for range 20 {
		must[uint64](t)(l.Create(c, fmt.Sprintf("filler/_/f%d", after), value, nil))
		after = l.Rev()
	}
	if l.OldestWatchRev() <= mid {
		t.Fatalf("the size bound let nothing up to %d go (oldest %d): the test proves nothing", mid, l.OldestWatchRev())
	}
	if err := l.Compact(c, mid); err != nil {
		t.Fatal(err)
	}
	st := l.st
	for key, rev := range first {
		if _, err := st.GetMsg(c, rev); err == nil && key != "pods/ns/p0" {
			t.Fatalf("%s: superseded revision %d still stored", key, rev)
		}
	}
	for _, rev := range []uint64{gone, tomb} {
		if _, err := st.GetMsg(c, rev); err == nil {
			t.Fatalf("deleted key's revision %d still stored", rev)
		}
	}
	if _, err := st.GetMsg(c, last["pods/ns/p0"]); err != nil {
		t.Fatalf("p0's state at the compaction revision was purged: %v", err)
	}
	want, _, err := l.List(c, "", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fresh := e.open(Config{})
	got, _, err := fresh.List(c, "", ReadOptions{Consistent: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("a fresh view holds %d keys, the writer's %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Key != want[i].Key || got[i].Rev != want[i].Rev {
			t.Fatalf("key %d: fresh %s@%d, writer %s@%d", i, got[i].Key, got[i].Rev, want[i].Key, want[i].Rev)
		}
	}
}
