package statelog

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// entriesString renders entries as key@rev=value, in order.
func entriesString(es []Entry) string {
	parts := make([]string, 0, len(es))
	for _, e := range es {
		parts = append(parts, fmt.Sprintf("%s@%d=%s", e.Key, e.Rev, e.Value))
	}
	return strings.Join(parts, " ")
}

func TestListAtRebuildsPastRevisions(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	l := e.open(Config{})
	r1 := must[uint64](t)(l.Create(c, "k/a", []byte("a1"), nil))
	r2 := must[uint64](t)(l.Create(c, "k/b", []byte("b1"), nil))
	must[uint64](t)(l.Create(c, "other/x", []byte("x"), nil))
	r3 := must[uint64](t)(l.Update(c, "k/a", []byte("a2"), r1, nil))
	r4 := must[uint64](t)(l.Delete(c, "k/b", r2, nil))
	r5 := must[uint64](t)(l.Create(c, "k/c", []byte("c1"), nil))
	want := map[uint64]string{
		r1: fmt.Sprintf("k/a@%d=a1", r1),
		r2: fmt.Sprintf("k/a@%d=a1 k/b@%d=b1", r1, r2),
		r3: fmt.Sprintf("k/a@%d=a2 k/b@%d=b1", r3, r2),
		r4: fmt.Sprintf("k/a@%d=a2", r3),
		r5: fmt.Sprintf("k/a@%d=a2 k/c@%d=c1", r3, r5),
	}
	for rev, w := range want {
		if got := entriesString(must[[]Entry](t)(l.ListAt(c, "k/", rev))); got != w {
			t.Errorf("ListAt(%d) = %q, want %q", rev, got, w)
		}
	}
	if err := l.Compact(c, r3); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ListAt(c, "k/", r2); !errors.Is(err, ErrExpired) {
		t.Fatalf("ListAt below the compaction: %v, want ErrExpired", err)
	}
	if got := entriesString(must[[]Entry](t)(l.ListAt(c, "k/", r4))); got != want[r4] {
		t.Fatalf("ListAt(%d) after compaction = %q, want %q", r4, got, want[r4])
	}
}

func TestListAtFutureRevisionWaits(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	l := e.open(Config{})
	rev := must[uint64](t)(l.Create(c, "k/a", []byte("a1"), nil))
	wctx, cancel := contextWithCancel(c)
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := l.ListAt(wctx, "k/", rev+5); err == nil {
		t.Fatal("a list at a revision the log has not reached answered")
	}
}
