package statelog

import (
	"fmt"
	"strings"
	"testing"
)

// With Config.Sync, writes return after the group fsync: concurrent creates share rounds.
func TestWritesWaitForSync(t *testing.T) {
	e := newEnv(t)
	y := e.srv.StreamSync(DefaultStream)
	l := e.open(Config{Sync: y})
	const writers, each = 16, 20
	results := make(chan error, writers*each)
	for w := range writers {
		go func() {
			for i := range each {
				_, err := l.Create(ctx(t), fmt.Sprintf("core/pods/ns/p%d-%d", w, i), []byte("v"), nil)
				results <- err
			}
		}()
	}
	for range writers * each {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	if r := y.Rounds(); r == 0 || r >= writers*each {
		t.Fatalf("%d creates, %d fsync rounds", writers*each, r)
	}
	es, _, err := l.List(ctx(t), "core/pods/ns/", ReadOptions{})
	if err != nil || len(es) != writers*each {
		t.Fatalf("list: %d entries, %v", len(es), err)
	}
}

// A write whose fsync fails is not acknowledged: the caller gets an error saying it is stored
// but not synced.
func TestWriteFailsWhenSyncFails(t *testing.T) {
	e := newEnv(t)
	y := e.srv.StreamSync(DefaultStream)
	l := e.open(Config{Sync: y})
	if _, err := l.Create(ctx(t), "core/pods/ns/a", []byte("v"), nil); err != nil {
		t.Fatal(err)
	}
	_ = y.Close()
	_, err := l.Create(ctx(t), "core/pods/ns/b", []byte("v"), nil)
	if err == nil || !strings.Contains(err.Error(), "not synced") {
		t.Fatalf("create with a failing fsync: %v", err)
	}
}

// A compaction's purges may rewrite old blocks the server does not sync: Compact ends with a
// round that syncs all of the stream's files.
func TestCompactSyncsTheStream(t *testing.T) {
	e := newEnv(t)
	y := e.srv.StreamSync(DefaultStream)
	l := e.open(Config{Sync: y})
	rev, err := l.Create(ctx(t), "core/pods/ns/a", []byte("1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if rev, err = l.Update(ctx(t), "core/pods/ns/a", []byte("2"), rev, nil); err != nil {
		t.Fatal(err)
	}
	before := y.Rounds()
	if err := l.Compact(ctx(t), rev); err != nil {
		t.Fatal(err)
	}
	// The mark's write is one round, the final sync of everything another.
	if r := y.Rounds(); r < before+2 {
		t.Fatalf("compaction ran %d fsync rounds, want the mark's and a full one", r-before)
	}
	e2, err := l.Get(ctx(t), "core/pods/ns/a", ReadOptions{})
	if err != nil || string(e2.Value) != "2" {
		t.Fatalf("after compaction: %q, %v", e2.Value, err)
	}
}
