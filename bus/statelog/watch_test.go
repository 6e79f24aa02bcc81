package statelog

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func TestWatchFromRevAfterRestart(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	l := e.open(Config{})
	var revs []uint64
	for i := range 10 {
		revs = append(revs, must[uint64](t)(l.Create(c, fmt.Sprintf("core/pods/ns/p%d", i), []byte(fmt.Sprint(i)), nil)))
	}
	del := must[uint64](t)(l.Delete(c, "core/pods/ns/p3", 0, nil))
	l.Close()
	e.restart()
	l = e.open(Config{})
	if l.Rev() != del {
		t.Fatalf("rev after restart %d, want %d", l.Rev(), del)
	}
	const from = 4 // events with rev 5..11
	w := must[*Watcher](t)(l.Watch(c, "core/pods/", WatchOptions{FromRev: revs[from-1]}))
	defer w.Stop()
	for i := from; i < 10; i++ {
		ev := next(t, w)
		if ev.Type != EventPut || ev.Rev != revs[i] || string(ev.Value) != fmt.Sprint(i) || ev.PrevRev != 0 {
			t.Fatalf("event %d: %+v", i, ev)
		}
	}
	ev := next(t, w)
	if ev.Type != EventDelete || ev.Rev != del || string(ev.Value) != "3" || ev.PrevRev != revs[3] {
		t.Fatalf("delete event: %+v", ev)
	}
	// Exactly those: the next event is a live one.
	live := must[uint64](t)(l.Create(c, "core/pods/ns/live", []byte("L"), nil))
	if ev := next(t, w); ev.Rev != live {
		t.Fatalf("after replay got %+v, want rev %d", ev, live)
	}
}

func TestCompactExpired(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	l := e.open(Config{})
	k := "apps/deployments/default/web"
	r1 := must[uint64](t)(l.Create(c, k, []byte("v1"), nil))
	r2 := must[uint64](t)(l.Update(c, k, []byte("v2"), r1, nil))
	r3 := must[uint64](t)(l.Update(c, k, []byte("v3"), r2, nil))
	g1 := must[uint64](t)(l.Create(c, "gone/x", []byte("g"), nil))
	g2 := must[uint64](t)(l.Delete(c, "gone/x", g1, nil))
	d1 := must[uint64](t)(l.Create(c, "dying/x", []byte("last"), nil))
	r4 := must[uint64](t)(l.Update(c, k, []byte("v4"), r3, nil))
	d2 := must[uint64](t)(l.Delete(c, "dying/x", d1, nil))
	if err := l.Compact(c, r4); err != nil {
		t.Fatal(err)
	}
	if l.CompactedRev() != r4 {
		t.Fatalf("compacted %d", l.CompactedRev())
	}
	check := func(l *Log) {
		t.Helper()
		if _, err := l.Watch(c, "", WatchOptions{FromRev: r4 - 1}); !errors.Is(err, ErrExpired) {
			t.Fatalf("watch below compaction: %v", err)
		}
		w := must[*Watcher](t)(l.Watch(c, "", WatchOptions{FromRev: r4}))
		defer w.Stop()
		ev := next(t, w)
		if ev.Type != EventDelete || ev.Rev != d2 || string(ev.Value) != "last" || ev.PrevRev != d1 {
			t.Fatalf("delete after compaction: %+v", ev)
		}
		if got := must[Entry](t)(l.Get(c, k, ReadOptions{})); string(got.Value) != "v4" || got.Rev != r4 {
			t.Fatalf("get after compaction: %+v", got)
		}
		// gone/x was deleted below the mark: its tombstone is purged, so a
		// create expects an empty subject.
		if _, err := l.Create(c, "gone/x", []byte("again"), nil); err != nil && !errors.Is(err, ErrExists) {
			t.Fatal(err)
		}
	}
	check(l)
	// Superseded v1..v3 and the gone/x value+tombstone were purged; v4, dying/x
	// (value kept for its delete event) and its tombstone, the mark remain.
	js, _ := jetstream.New(e.nc)
	st := must[jetstream.Stream](t)(js.Stream(c, "STATE"))
	for _, seq := range []uint64{r1, r2, r3, g1, g2} {
		if _, err := st.GetMsg(c, seq); !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Fatalf("seq %d still stored: %v", seq, err)
		}
	}
	for _, seq := range []uint64{d1, r4, d2} {
		if _, err := st.GetMsg(c, seq); err != nil {
			t.Fatalf("seq %d purged: %v", seq, err)
		}
	}
	l.Close()
	e.restart()
	l = e.open(Config{})
	if l.CompactedRev() != r4 {
		t.Fatalf("compacted after restart %d", l.CompactedRev())
	}
	check(l)
}

func TestSendInitial(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	l := e.open(Config{})
	ra := must[uint64](t)(l.Create(c, "core/pods/ns/a", []byte("a"), nil))
	must[uint64](t)(l.Create(c, "core/pods/ns/b", []byte("b0"), nil))
	rb := must[uint64](t)(l.Update(c, "core/pods/ns/b", []byte("b"), ra+1, nil))
	must[uint64](t)(l.Create(c, "core/services/ns/s", []byte("s"), nil))
	must[uint64](t)(l.Create(c, "core/pods/ns/c", []byte("c"), nil))
	rc := must[uint64](t)(l.Delete(c, "core/pods/ns/c", 0, nil))
	if err := l.WaitForRev(c, rc); err != nil {
		t.Fatal(err)
	}
	w := must[*Watcher](t)(l.Watch(c, "core/pods/", WatchOptions{SendInitial: true}))
	defer w.Stop()
	e1, e2, end := next(t, w), next(t, w), next(t, w)
	if e1.Type != EventPut || e1.Key != "core/pods/ns/a" || e1.Rev != ra ||
		e2.Key != "core/pods/ns/b" || string(e2.Value) != "b" || e2.Rev != rb {
		t.Fatalf("initial: %+v %+v", e1, e2)
	}
	if end.Type != EventBookmark || !end.InitialEnd || end.Rev != rc {
		t.Fatalf("initial end: %+v", end)
	}
	r := must[uint64](t)(l.Update(c, "core/pods/ns/a", []byte("a2"), ra, nil))
	if ev := next(t, w); ev.Rev != r || ev.PrevRev != ra || string(ev.PrevValue) != "a" {
		t.Fatalf("live: %+v", ev)
	}
}

func TestBookmarksForIdleWatcher(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	l := e.open(Config{BookmarkInterval: 40 * time.Millisecond})
	must[uint64](t)(l.Create(c, "a/x", nil, nil))
	w := must[*Watcher](t)(l.Watch(c, "a/", WatchOptions{Bookmarks: true}))
	defer w.Stop()
	// Writes elsewhere advance the revision the idle watcher is current to.
	rOther := must[uint64](t)(l.Create(c, "b/y", nil, nil))
	for {
		ev := next(t, w)
		if ev.Type != EventBookmark {
			t.Fatalf("unexpected %+v", ev)
		}
		if ev.Rev == rOther {
			break
		}
	}
	// Bookmarks keep coming, at least once per interval.
	start := time.Now()
	for range 3 {
		if ev := next(t, w); ev.Type != EventBookmark {
			t.Fatalf("unexpected %+v", ev)
		}
	}
	if el := time.Since(start); el > 3*40*time.Millisecond+500*time.Millisecond {
		t.Fatalf("3 bookmarks took %v", el)
	}
	// A watcher that did not ask gets none.
	w2 := must[*Watcher](t)(l.Watch(c, "a/", WatchOptions{}))
	defer w2.Stop()
	r := must[uint64](t)(l.Create(c, "a/z", nil, nil))
	if ev := next(t, w2); ev.Type != EventPut || ev.Rev != r {
		t.Fatalf("plain watcher got %+v", ev)
	}
}

func TestPrefixFilterAndDeleteValue(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	l := e.open(Config{})
	w := must[*Watcher](t)(l.Watch(c, "core/pods/ns/", WatchOptions{}))
	defer w.Stop()
	must[uint64](t)(l.Create(c, "core/pods/other/x", []byte("no"), nil))
	must[uint64](t)(l.Create(c, "core/services/ns/x", []byte("no"), nil))
	r1 := must[uint64](t)(l.Create(c, "core/pods/ns/x", []byte("yes"), Header{{"traceparent", "t1"}}))
	r2 := must[uint64](t)(l.Delete(c, "core/pods/ns/x", r1, Header{{"traceparent", "t2"}}))
	put, del := next(t, w), next(t, w)
	if put.Type != EventPut || put.Rev != r1 || put.Header.Get("traceparent") != "t1" {
		t.Fatalf("put %+v", put)
	}
	if del.Type != EventDelete || del.Rev != r2 || string(del.Value) != "yes" || string(del.PrevValue) != "yes" ||
		del.PrevRev != r1 || del.Header.Get("traceparent") != "t2" {
		t.Fatalf("delete %+v", del)
	}
}

func TestTooSlowWatcher(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	l := e.open(Config{WatchBuffer: 4})
	w := must[*Watcher](t)(l.Watch(c, "", WatchOptions{}))
	fast := must[*Watcher](t)(l.Watch(c, "", WatchOptions{}))
	// Each write waits for the reading watcher to take its event, so only the watcher that
	// never reads can fall behind, however loaded the machine is.
	for i := range 20 {
		must[uint64](t)(l.Create(c, fmt.Sprintf("k/%d", i), nil, nil))
		select {
		case ev, ok := <-fast.Events():
			if !ok || ev.Key != fmt.Sprintf("k/%d", i) {
				t.Fatalf("reading watcher: event %d: %+v (open %v, err %v)", i, ev, ok, fast.Err())
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("reading watcher did not get event %d", i)
		}
	}
	waitClosed(t, w)
	if !errors.Is(w.Err(), ErrTooSlow) {
		t.Fatalf("err = %v", w.Err())
	}
	fast.Stop()
	waitClosed(t, fast)
	if fast.Err() != nil {
		t.Fatalf("stopped watcher err %v", fast.Err())
	}
}

func TestWatchEndsOnCancelAndClose(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	l := e.open(Config{})
	cctx, cancel := contextWithCancel(c)
	w := must[*Watcher](t)(l.Watch(cctx, "", WatchOptions{}))
	cancel()
	waitClosed(t, w)
	if w.Err() != nil {
		t.Fatalf("cancelled watch err %v", w.Err())
	}
	w2 := must[*Watcher](t)(l.Watch(c, "", WatchOptions{}))
	l.Close()
	waitClosed(t, w2)
	if !errors.Is(w2.Err(), ErrClosed) {
		t.Fatalf("closed log watch err %v", w2.Err())
	}
}
