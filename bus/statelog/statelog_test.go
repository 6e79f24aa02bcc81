package statelog

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestCRUD(t *testing.T) {
	e := newEnv(t)
	l := e.open(Config{})
	c := ctx(t)
	key := "discovery.k8s.io/endpointslices/default/web.v2-x y"

	r1, err := l.Create(c, key, []byte("a"), Header{{"traceparent", "00-abc-01"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Create(c, key, []byte("b"), nil); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	got, err := l.Get(c, key, ReadOptions{MinRev: r1})
	if err != nil || string(got.Value) != "a" || got.Rev != r1 || got.Header.Get("traceparent") != "00-abc-01" {
		t.Fatalf("get: %+v %v", got, err)
	}
	if len(got.Header) != 1 || got.Header.Get(hdrOp) != "" {
		t.Fatalf("internal header leaked: %v", got.Header)
	}
	r2, err := l.Update(c, key, []byte("b"), r1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Update(c, key, []byte("c"), r1, nil); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale update: %v", err)
	}
	if _, err := l.Update(c, "core/pods/default/none", []byte("c"), r1, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update missing: %v", err)
	}
	if _, err := l.Delete(c, key, r1, nil); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale delete: %v", err)
	}
	r3, err := l.Delete(c, key, r2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Get(c, key, ReadOptions{MinRev: r3}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	// A tombstone's revision must not serve as a CAS base for an update.
	if _, err := l.Update(c, key, []byte("x"), r3, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update on tombstone: %v", err)
	}
	if _, err := l.Delete(c, key, 0, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete deleted: %v", err)
	}
	r4, err := l.Create(c, key, []byte("again"), nil)
	if err != nil || r4 <= r3 {
		t.Fatalf("re-create: %d %v", r4, err)
	}
	r5, err := l.Update(c, key, []byte("uncond"), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := must[Entry](t)(l.Get(c, key, ReadOptions{MinRev: r5})); string(got.Value) != "uncond" {
		t.Fatalf("unconditional update: %q", got.Value)
	}
	for _, bad := range []string{"", "/a", "a//b", "a/"} {
		if _, err := l.Create(c, bad, nil, nil); !errors.Is(err, ErrInvalid) {
			t.Fatalf("key %q: %v", bad, err)
		}
	}
}

func TestListSortedWithRev(t *testing.T) {
	e := newEnv(t)
	l := e.open(Config{})
	c := ctx(t)
	for _, k := range []string{"core/pods/ns/c", "core/pods/ns/a", "core/pods/other/z", "core/podsx/ns/b", "core/pods/ns/b"} {
		must[uint64](t)(l.Create(c, k, []byte(k), nil))
	}
	es, rev, err := l.List(c, "core/pods/ns/", ReadOptions{Consistent: true})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range es {
		keys = append(keys, e.Key)
	}
	if fmt.Sprint(keys) != "[core/pods/ns/a core/pods/ns/b core/pods/ns/c]" || rev != 5 {
		t.Fatalf("list = %v at %d", keys, rev)
	}
}

// Read-modify-write increments from 8 goroutines through one Log each
// (two share a connection): CAS must never lose an update.
func TestConcurrentCAS(t *testing.T) {
	e := newEnv(t)
	// 1,600 contended read-modify-writes: a loaded machine needs more than ctx's 20 s, and
	// this test asserts no lost update, not a speed.
	c := ctxWithin(t, 2*time.Minute)
	logs := []*Log{e.open(Config{}), e.open(Config{})}
	const key, workers, per = "test/counters/_/c", 8, 200
	created := must[uint64](t)(logs[0].Create(c, key, []byte("0"), nil))
	var wg sync.WaitGroup
	var conflicts sync.Map
	errc := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			l := logs[w%len(logs)]
			n := 0
			for done := 0; done < per; {
				cur, err := l.Get(c, key, ReadOptions{MinRev: created})
				if err != nil {
					errc <- err
					return
				}
				v, _ := strconv.Atoi(string(cur.Value))
				_, err = l.Update(c, key, []byte(strconv.Itoa(v+1)), cur.Rev, nil)
				switch {
				case err == nil:
					done++
				case errors.Is(err, ErrConflict):
					n++
					// Re-read once the view has moved past the stale revision.
					if err := l.WaitForRev(c, cur.Rev+1); err != nil {
						errc <- err
						return
					}
				default:
					errc <- err
					return
				}
			}
			conflicts.Store(w, n)
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	got, err := logs[1].Get(c, key, ReadOptions{Consistent: true})
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Value) != strconv.Itoa(workers*per) {
		t.Fatalf("counter = %s, want %d", got.Value, workers*per)
	}
	total := 0
	conflicts.Range(func(_, v any) bool { total += v.(int); return true })
	t.Logf("%d increments, %d conflicts retried", workers*per, total)
}

func TestTwoLogsSeeAll(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	a := e.open(Config{})
	nc2, err := e.srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	b, err := Open(c, nc2, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	wa := must[*Watcher](t)(a.Watch(c, "", WatchOptions{}))
	wb := must[*Watcher](t)(b.Watch(c, "", WatchOptions{}))
	ra := must[uint64](t)(a.Create(c, "x/a", []byte("1"), nil))
	rb := must[uint64](t)(b.Create(c, "x/b", []byte("2"), nil))
	if _, err := b.Create(c, "x/a", nil, nil); !errors.Is(err, ErrExists) {
		t.Fatalf("cross-instance create: %v", err)
	}
	for _, w := range []*Watcher{wa, wb} {
		e1, e2 := next(t, w), next(t, w)
		if e1.Key != "x/a" || e1.Rev != ra || e2.Key != "x/b" || e2.Rev != rb {
			t.Fatalf("events %+v %+v", e1, e2)
		}
	}
	// b's update of a's write via CAS; a sees it.
	r := must[uint64](t)(b.Update(c, "x/a", []byte("3"), ra, nil))
	if got := must[Entry](t)(a.Get(c, "x/a", ReadOptions{MinRev: r})); string(got.Value) != "3" {
		t.Fatalf("a sees %q", got.Value)
	}
}

// A compaction made through one Log reaches the other Log's view via the mark.
func TestCompactSeenByOtherLog(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	a, b := e.open(Config{}), e.open(Config{})
	r1 := must[uint64](t)(a.Create(c, "k/x", []byte("1"), nil))
	r2 := must[uint64](t)(a.Update(c, "k/x", []byte("2"), r1, nil))
	if err := a.Compact(c, r2); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitForRev(c, a.Rev()); err != nil {
		t.Fatal(err)
	}
	if b.CompactedRev() != r2 {
		t.Fatalf("b compacted %d, want %d", b.CompactedRev(), r2)
	}
	if _, err := b.Watch(c, "", WatchOptions{FromRev: r1}); !errors.Is(err, ErrExpired) {
		t.Fatalf("b watch below mark: %v", err)
	}
	// A lower compaction never moves the mark back.
	if err := b.Compact(c, r1); err != nil || b.CompactedRev() != r2 {
		t.Fatalf("lower compact: %v, mark %d", err, b.CompactedRev())
	}
}

// TestWritesDoNotKeepValue: a written value's buffer is the caller's again once the write
// returns (the apiserver encodes into pooled buffers): overwriting it changes nothing stored,
// in this Log's view or another's.
func TestWritesDoNotKeepValue(t *testing.T) {
	e := newEnv(t)
	l, other := e.open(Config{}), e.open(Config{})
	c := ctx(t)
	key := "core/configmaps/default/reused"
	buf := []byte("first value")
	r1, err := l.Create(c, key, buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, "XXXXXXXXXXX")
	buf = append(buf[:0], "second value"...)
	r2, err := l.Update(c, key, buf, r1, nil)
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, "YYYYYYYYYYYY")
	for _, log := range []*Log{l, other} {
		if got := must[Entry](t)(log.Get(c, key, ReadOptions{MinRev: r2})); string(got.Value) != "second value" {
			t.Fatalf("stored %q after the caller reused its buffer, want %q", got.Value, "second value")
		}
	}
	first, err := l.ListAt(c, "core/configmaps/", r1)
	if err != nil || len(first) != 1 || string(first[0].Value) != "first value" {
		t.Fatalf("at %d: %+v %v, want %q", r1, first, err, "first value")
	}
}
