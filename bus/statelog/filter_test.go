package statelog

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A view of some kinds holds only them, yet reaches every revision of the stream: at Open,
// for a consistent read and for a wait on a revision still to come, with the last messages
// all of other kinds. Both consumer flavours (ordered, and a reader's fixed names) are covered.
func TestFilteredViewReachesRevisionsOfOtherKinds(t *testing.T) {
	for name, cfg := range map[string]Config{
		"ordered consumer": {ReadOnly: true, Only: []string{"core/services/"}},
		"named consumer":   {ReadOnly: true, Only: []string{"core/services/"}, ConsumerNames: []string{"r_view0"}},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			w := e.open(Config{Memory: true})
			create := func(key string) uint64 {
				t.Helper()
				return must[uint64](t)(w.Create(ctx(t), key, []byte(key), Header{{"traceparent", "00-" + key}}))
			}
			create("core/pods/ns/p0")
			svc := create("core/services/ns/s0")
			last := create("core/pods/ns/p1")

			r := e.open(cfg)
			if got := r.Applied(); got < last {
				t.Fatalf("opened at revision %d, before the stream's last %d", got, last)
			}
			if n := r.view.live.Len(); n != 1 {
				t.Fatalf("the view holds %d keys, want only the Service", n)
			}
			es, rev, err := r.List(ctx(t), "core/services/", ReadOptions{})
			if err != nil || len(es) != 1 || es[0].Rev != svc || rev < last {
				t.Fatalf("services: %+v at %d, %v", es, rev, err)
			}

			// More writes of other kinds: a consistent read reaches them without waiting long.
			last = create("core/pods/ns/p2")
			start := time.Now()
			if _, err := r.Get(ctx(t), "core/services/ns/s0", ReadOptions{Consistent: true}); err != nil {
				t.Fatal(err)
			}
			if r.Applied() < last {
				t.Fatalf("consistent read at %d, before the stream's %d", r.Applied(), last)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("consistent read took %v", took)
			}

			// A revision still to come, reached by writes of another kind only.
			done := make(chan error, 1)
			go func() { done <- r.WaitForRev(ctx(t), last+2) }()
			create("core/pods/ns/p3")
			create("core/pods/ns/p4")
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("WaitForRev(%d) not reached, view at %d", last+2, r.Applied())
			}

			// A watch from there sees the next change of its kind at its revision, and nothing
			// of the others.
			wch := must[*Watcher](t)(r.Watch(ctx(t), "core/services/", WatchOptions{FromRev: r.Applied()}))
			defer wch.Stop()
			create("core/pods/ns/p5")
			upd := must[uint64](t)(w.Update(ctx(t), "core/services/ns/s0", []byte("v2"), svc, nil))
			if ev := nextNonBookmark(t, wch); ev.Key != "core/services/ns/s0" || ev.Rev != upd || ev.PrevRev != svc || string(ev.Value) != "v2" {
				t.Fatalf("watch event %+v, want the update at %d", ev, upd)
			}
		})
	}
}

// A stream whose messages are all of other kinds still opens a filtered view at its end.
func TestFilteredViewOpensOnAStreamWithNoneOfItsKinds(t *testing.T) {
	e := newEnv(t)
	w := e.open(Config{Memory: true})
	last := must[uint64](t)(w.Create(ctx(t), "core/pods/ns/p", []byte("p"), nil))
	r := e.open(Config{ReadOnly: true, Only: []string{"core/services/"}, ConsumerNames: []string{"r_view0"}})
	if r.Applied() < last {
		t.Fatalf("opened at %d, before %d", r.Applied(), last)
	}
	if es, _, err := r.List(ctx(t), "core/services/", ReadOptions{Consistent: true}); err != nil || len(es) != 0 {
		t.Fatalf("services: %+v, %v", es, err)
	}
}

// What a filtered view does not hold is refused, never answered as empty; a bad prefix is
// refused at Open, naming it.
func TestFilteredViewRefusesWhatItDoesNotHold(t *testing.T) {
	e := newEnv(t)
	if _, err := Open(ctx(t), e.nc, Config{Memory: true, Only: []string{"core/services"}}); err == nil || !strings.Contains(err.Error(), `"core/services"`) {
		t.Fatalf("Only without a trailing slash: %v", err)
	}
	w := e.open(Config{Memory: true})
	must[uint64](t)(w.Create(ctx(t), "core/pods/ns/p", []byte("p"), nil))
	f := e.open(Config{Memory: true, Only: []string{"core/services/", "discovery.k8s.io/endpointslices/"}})
	if _, err := f.Get(ctx(t), "core/pods/ns/p", ReadOptions{}); !errors.Is(err, ErrOutsideView) {
		t.Fatalf("Get of a pod: %v", err)
	}
	if _, _, err := f.List(ctx(t), "core/", ReadOptions{}); !errors.Is(err, ErrOutsideView) {
		t.Fatalf("List of core/: %v", err)
	}
	if _, err := f.Watch(ctx(t), "", WatchOptions{}); !errors.Is(err, ErrOutsideView) {
		t.Fatalf("Watch of everything: %v", err)
	}
	if _, err := f.ListAt(ctx(t), "core/pods/", 1); !errors.Is(err, ErrOutsideView) {
		t.Fatalf("ListAt of pods: %v", err)
	}
	if _, err := f.Create(ctx(t), "core/pods/ns/q", []byte("q"), nil); !errors.Is(err, ErrOutsideView) {
		t.Fatalf("Create of a pod: %v", err)
	}
	if err := f.Compact(ctx(t), 1); !errors.Is(err, ErrOutsideView) {
		t.Fatalf("Compact: %v", err)
	}
	// Its own kinds it writes and reads back (read-your-writes), other kinds' writes between.
	rev := must[uint64](t)(f.Create(ctx(t), "discovery.k8s.io/endpointslices/ns/e", []byte("e"), nil))
	must[uint64](t)(w.Create(ctx(t), "core/pods/ns/p2", []byte("p"), nil))
	if got, err := f.Get(ctx(t), "discovery.k8s.io/endpointslices/ns/e", ReadOptions{}); err != nil || got.Rev != rev {
		t.Fatalf("own write read back: %+v, %v", got, err)
	}
	if got := f.Rev(); got < rev {
		t.Fatalf("Rev %d before own write %d", got, rev)
	}
}

// A view that drops headers keeps none; a view that keeps them hands them to readers.
func TestDropHeaders(t *testing.T) {
	e := newEnv(t)
	w := e.open(Config{Memory: true})
	must[uint64](t)(w.Create(ctx(t), "a/b", []byte("v"), Header{{"traceparent", "00-abc"}}))
	r := e.open(Config{ReadOnly: true, DropHeaders: true})
	got := must[Entry](t)(r.Get(ctx(t), "a/b", ReadOptions{}))
	if len(got.Header) != 0 || string(got.Value) != "v" {
		t.Fatalf("dropped headers: %+v", got)
	}
	if kept := must[Entry](t)(w.Get(ctx(t), "a/b", ReadOptions{})); kept.Header.Get("traceparent") != "00-abc" {
		t.Fatalf("kept headers: %+v", kept)
	}
}

// A filtered reader's consumer, recreated after a gap, starts after what the view has applied
// (a revision raised past other kinds' messages included) and misses none of its kinds.
func TestFilteredViewAcrossAConsumerReset(t *testing.T) {
	e := newEnv(t)
	w := e.open(Config{Memory: true})
	r := e.open(Config{ReadOnly: true, Only: []string{"core/services/"}, ConsumerNames: []string{"r_view0", "r_view1"}})
	f := r.feed.(*slotFeed)
	var want []string
	for i := range 6 {
		must[uint64](t)(w.Create(ctx(t), "core/pods/ns/p"+string(rune('a'+i)), []byte("p"), nil))
		key := "core/services/ns/s" + string(rune('a'+i))
		must[uint64](t)(w.Create(ctx(t), key, []byte("s"), nil))
		want = append(want, key)
		if i%2 == 0 {
			// Raise the view past a pod, then make the consumer start over.
			must[uint64](t)(w.Create(ctx(t), "core/pods/ns/q"+string(rune('a'+i)), []byte("q"), nil))
			if _, _, err := r.List(ctx(t), "core/services/", ReadOptions{Consistent: true}); err != nil {
				t.Fatal(err)
			}
			f.requestReset()
		}
	}
	last := must[uint64](t)(w.Create(ctx(t), "core/pods/ns/z", []byte("z"), nil))
	es, rev, err := r.List(ctx(t), "core/services/", ReadOptions{Consistent: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Key)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") || rev < last {
		t.Fatalf("services %v at %d, want %v at %d or later", got, rev, want, last)
	}
}
