package statelog

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A write returns at its ack, before the view has it. With the view's consumer stopped the
// view never gets it by itself, so every read below that sees the write proves the read
// waited for (and caught up to) this Log's own write; a read of another key does not wait.
func TestReadYourWritesWithAViewBehind(t *testing.T) {
	e := newEnv(t)
	l := e.open(Config{Memory: true})
	c := ctx(t)
	must[uint64](t)(l.Create(c, "other/x", []byte("x"), nil))
	must[Entry](t)(l.Get(c, "other/x", ReadOptions{}))
	cc := l.feed.(jetstream.ConsumeContext)
	cc.Stop()
	select {
	case <-cc.Closed():
	case <-time.After(10 * time.Second):
		t.Fatal("the consumer did not stop")
	}
	rev := must[uint64](t)(l.Create(c, "pods/ns/a", []byte("a"), nil))
	if l.applied() >= rev {
		t.Fatalf("the view has the write (rev %d) with no consumer: the test proves nothing", rev)
	}
	if got, err := l.Get(c, "other/x", ReadOptions{}); err != nil || string(got.Value) != "x" {
		t.Fatalf("get other/x: %+v, %v", got, err)
	}
	if l.applied() >= rev {
		t.Fatal("a read of a key this Log did not write waited for the view")
	}
	w := must[*Watcher](t)(l.Watch(c, "pods/", WatchOptions{SendInitial: true}))
	defer w.Stop()
	if ev := next(t, w); ev.Key != "pods/ns/a" || ev.Rev != rev {
		t.Fatalf("watch snapshot after the write: %+v", ev)
	}
	if end := next(t, w); end.Type != EventBookmark || !end.InitialEnd || end.Rev < rev {
		t.Fatalf("snapshot end %+v, want a bookmark at or after %d", end, rev)
	}
	rev2 := must[uint64](t)(l.Update(c, "pods/ns/a", []byte("a2"), rev, nil))
	if got, err := l.Get(c, "pods/ns/a", ReadOptions{}); err != nil || got.Rev != rev2 || string(got.Value) != "a2" {
		t.Fatalf("get after own update: %+v, %v", got, err)
	}
	rev3 := must[uint64](t)(l.Create(c, "pods/ns/b", []byte("b"), nil))
	es, at, err := l.List(c, "pods/", ReadOptions{})
	if err != nil || len(es) != 2 || es[1].Key != "pods/ns/b" || at < rev3 {
		t.Fatalf("list after own create: %+v at %d, %v", es, at, err)
	}
	// Conflicts stay exact against a view that is behind.
	if _, err := l.Update(c, "pods/ns/b", []byte("x"), rev3-1, nil); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale update: %v", err)
	}
	if _, err := l.Create(c, "pods/ns/b", []byte("x"), nil); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	if r := l.Rev(); r < rev3 {
		t.Fatalf("Rev %d misses this Log's write at %d", r, rev3)
	}
}

// Writers on one Log each read back through the same Log at once: every Get, List and watch
// from the write's revision sees exactly that write, with the view racing behind.
func TestReadYourWritesConcurrentWriters(t *testing.T) {
	e := newEnv(t)
	l := e.open(Config{Memory: true})
	c := ctx(t)
	const workers, per = 8, 60
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			prefix := fmt.Sprintf("w%d/", w)
			for i := range per {
				key := fmt.Sprintf("%s%03d", prefix, i)
				rev, err := l.Create(c, key, []byte(key), nil)
				if err != nil {
					errc <- err
					return
				}
				if got, err := l.Get(c, key, ReadOptions{}); err != nil || got.Rev != rev {
					errc <- fmt.Errorf("get %s after its create at %d: %+v, %v", key, rev, got, err)
					return
				}
				rev, err = l.Update(c, key, []byte("u"), rev, nil)
				if err != nil {
					errc <- err
					return
				}
				es, at, err := l.List(c, prefix, ReadOptions{})
				if err != nil || len(es) != i+1 || es[i].Rev != rev || at < rev {
					errc <- fmt.Errorf("list %s after update at %d: %d entries at %d, %v", prefix, rev, len(es), at, err)
					return
				}
				if i%10 == 0 {
					wt, err := l.Watch(c, key, WatchOptions{FromRev: rev - 1})
					if err != nil {
						errc <- err
						return
					}
					var ev Event
					select {
					case ev = <-wt.Events():
					case <-time.After(10 * time.Second):
					}
					wt.Stop()
					if ev.Key != key || ev.Rev != rev {
						errc <- fmt.Errorf("watch from %d: %+v", rev-1, ev)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if es, _, err := l.List(c, "", ReadOptions{}); err != nil || len(es) != workers*per {
		t.Fatalf("%d keys, %v; want %d", len(es), err, workers*per)
	}
	// The applier settles a write just after raising the view's revision, which is what the
	// List above waited for: the last one may be settling still.
	for deadline := time.Now().Add(5 * time.Second); l.own.n.Load() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d writes still pending after the view has them all", l.own.n.Load())
		}
	}
}
