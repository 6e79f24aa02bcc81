package statelog

import (
	"testing"
	"time"
)

// When the view's consumer stops delivering (its server died and the library has not yet made
// a new one), a write still returns, Rev and reads after it find it in the view, read straight
// from the stream, and watchers see the writes in order with none missing.
func TestWritesCatchUpWhenTheConsumerStalls(t *testing.T) {
	e := newEnv(t)
	l := e.open(Config{Memory: true})
	w, err := l.Watch(ctx(t), "a/", WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := l.Create(ctx(t), "a/0", []byte("0"), nil); err != nil {
		t.Fatal(err)
	}
	l.feed.Stop() // the stall

	// Another client's writes, which this view has no consumer to bring in.
	other := e.open(Config{Memory: true})
	for _, k := range []string{"a/1", "a/2"} {
		if _, err := other.Create(ctx(t), k, []byte(k), nil); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	rev, err := l.Create(ctx(t), "a/3", []byte("3"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if l.Rev() < rev {
		t.Fatalf("write returned at view revision %d, before its own %d", l.Rev(), rev)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("write took %v with a stalled consumer", took)
	}
	if e, err := l.Get(ctx(t), "a/2", ReadOptions{}); err != nil || string(e.Value) != "a/2" {
		t.Fatalf("a/2 in the view: %+v, %v", e, err)
	}
	var got []string
	for range 4 {
		got = append(got, next(t, w).Key)
	}
	if want := []string{"a/0", "a/1", "a/2", "a/3"}; len(got) != 4 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Fatalf("watch events %v, want %v", got, want)
	}
	// A consistent read catches up too.
	if _, err := other.Create(ctx(t), "a/4", []byte("4"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Get(ctx(t), "a/4", ReadOptions{Consistent: true}); err != nil {
		t.Fatalf("consistent read after a stall: %v", err)
	}
}
