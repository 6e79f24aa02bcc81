package statelog

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// svcJSON is a Service-like value: objects of a kind share most of their bytes.
func svcJSON(i int) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"svc-%d","namespace":"bench",`+
		`"uid":"6f1c2a%04d-1b2c-4d5e-8f90-a1b2c3d4e5f6","resourceVersion":"","creationTimestamp":"2026-12-05T02:59:41Z"},`+
		`"spec":{"ports":[{"name":"http","protocol":"TCP","port":80,"targetPort":80}],"clusterIP":"10.96.%d.%d",`+
		`"clusterIPs":["10.96.%d.%d"],"type":"ClusterIP","sessionAffinity":"None","ipFamilies":["IPv4"],`+
		`"ipFamilyPolicy":"SingleStack","internalTrafficPolicy":"Cluster"},"status":{"loadBalancer":{}}}`,
		i, i, i>>8, i&255, i>>8, i&255)
}

// A view that packs its values hands back every value as written, through every read path
// (Get, List, a snapshot, an update's previous value, a delete's value), and keeps far fewer
// bytes than the values it holds.
func TestPackedValuesReadBackAsWritten(t *testing.T) {
	e := newEnv(t)
	w := e.open(Config{})
	const n = 200
	revs := make([]uint64, n)
	for i := range n {
		rev, err := w.Create(ctx(t), fmt.Sprintf("core/services/bench/svc-%d", i), svcJSON(i), nil)
		if err != nil {
			t.Fatal(err)
		}
		revs[i] = rev
	}
	if _, err := w.Create(ctx(t), "core/configmaps/bench/short", []byte("x"), nil); err != nil {
		t.Fatal(err) // its kind has too few bytes to seed a dictionary: kept as written
	}
	r := e.open(Config{ReadOnly: true})
	if err := r.WaitForRev(ctx(t), w.Rev()); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		got, err := r.Get(ctx(t), fmt.Sprintf("core/services/bench/svc-%d", i), ReadOptions{})
		if err != nil || string(got.Value) != string(svcJSON(i)) || got.Rev != revs[i] {
			t.Fatalf("Get svc-%d: rev %d %q, %v; want rev %d %q", i, got.Rev, got.Value, err, revs[i], svcJSON(i))
		}
	}
	if got, err := r.Get(ctx(t), "core/configmaps/bench/short", ReadOptions{}); err != nil || string(got.Value) != "x" {
		t.Fatalf("Get short: %q, %v", got.Value, err)
	}
	list, _, err := r.List(ctx(t), "core/services/", ReadOptions{})
	if err != nil || len(list) != n {
		t.Fatalf("List: %d entries, %v", len(list), err)
	}
	var written, kept int
	r.view.mu.RLock()
	r.view.live.Ascend(func(it *item) bool {
		if it.e.Value[0] == keptDict {
			kept += len(it.e.Value)
			written += len(svcJSON(0))
		}
		return true
	})
	r.view.mu.RUnlock()
	if written == 0 || kept*3 > written {
		t.Fatalf("the view keeps %d bytes of %d written", kept, written)
	}

	ws, err := r.Watch(ctx(t), "core/services/", WatchOptions{SendInitial: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Stop()
	seen := map[string]string{}
	for range n {
		ev := next(t, ws)
		seen[ev.Key] = string(ev.Value)
	}
	for i := range n {
		if k := fmt.Sprintf("core/services/bench/svc-%d", i); seen[k] != string(svcJSON(i)) {
			t.Fatalf("snapshot %s: %q", k, seen[k])
		}
	}
	if ev := next(t, ws); ev.Type != EventBookmark || !ev.InitialEnd {
		t.Fatalf("after the snapshot: %+v", ev)
	}
	updated := svcJSON(n + 1)
	if _, err := w.Update(ctx(t), "core/services/bench/svc-7", updated, revs[7], nil); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, ws); ev.Type != EventPut || string(ev.Value) != string(updated) || string(ev.PrevValue) != string(svcJSON(7)) {
		t.Fatalf("update event: %+v", ev)
	}
	if _, err := w.Delete(ctx(t), "core/services/bench/svc-8", revs[8], nil); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, ws); ev.Type != EventDelete || string(ev.Value) != string(svcJSON(8)) || ev.PrevRev != revs[8] {
		t.Fatalf("delete event: %+v", ev)
	}
}

// A view whose history starts at Open answers a watch from before it with ErrExpired, and one
// from its own revision with every later event; the events it replayed are not kept.
func TestHistoryFromOpen(t *testing.T) {
	e := newEnv(t)
	w := e.open(Config{})
	first, err := w.Create(ctx(t), "core/services/bench/a", svcJSON(1), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Create(ctx(t), "core/services/bench/b", svcJSON(2), nil); err != nil {
		t.Fatal(err)
	}
	r := e.open(Config{ReadOnly: true, HistoryFromOpen: true})
	if err := r.WaitForRev(ctx(t), w.Rev()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Watch(ctx(t), "core/services/", WatchOptions{FromRev: first}); !errors.Is(err, ErrExpired) {
		t.Fatalf("watch from %d, before Open: %v, want ErrExpired", first, err)
	}
	r.view.mu.RLock()
	kept := len(r.view.history)
	r.view.mu.RUnlock()
	if kept != 0 {
		t.Fatalf("the view kept %d replayed events", kept)
	}
	ws, err := r.Watch(ctx(t), "core/services/", WatchOptions{FromRev: r.Rev()})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Stop()
	rev, err := w.Create(ctx(t), "core/services/bench/c", svcJSON(3), nil)
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, ws); ev.Key != "core/services/bench/c" || ev.Rev != rev || string(ev.Value) != string(svcJSON(3)) {
		t.Fatalf("event after Open: %+v", ev)
	}
	// The history now holds what came after Open: a watch from Open's revision replays it.
	again, err := r.Watch(ctx(t), "core/services/", WatchOptions{FromRev: rev - 1})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Stop()
	if ev := next(t, again); ev.Rev != rev {
		t.Fatalf("replayed event: %+v", ev)
	}
}

// Values of a kind with a dictionary come back as written through the history too: a watch
// replaying creates, updates (their previous values) and deletes, and an exact list.
func TestPackedValuesReadBackFromHistory(t *testing.T) {
	l := newEnv(t).open(Config{})
	c := ctx(t)
	for i := range 40 { // past the kind's dictionary seed
		if _, err := l.Create(c, fmt.Sprintf("core/services/seed/svc-%d", i), svcJSON(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	before := l.Rev()
	key := "core/services/bench/a"
	r1, err := l.Create(c, key, svcJSON(101), nil)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := l.Update(c, key, svcJSON(102), r1, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.view.mu.RLock()
	it, _ := l.view.live.Get(&item{key: key})
	l.view.mu.RUnlock()
	if it.e.Value[0] != keptDict {
		t.Fatalf("a Service after its kind's seed is kept plain")
	}
	at, err := l.ListAt(c, "core/services/bench/", r1)
	if err != nil || len(at) != 1 || !bytes.Equal(at[0].Value, svcJSON(101)) {
		t.Fatalf("list at %d: %+v, %v", r1, at, err)
	}
	replay, err := l.Watch(c, "core/services/bench/", WatchOptions{FromRev: before})
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Stop()
	if ev := next(t, replay); ev.Rev != r1 || !bytes.Equal(ev.Value, svcJSON(101)) || ev.PrevValue != nil {
		t.Fatalf("replayed create: %+v", ev)
	}
	if ev := next(t, replay); ev.Rev != r2 || !bytes.Equal(ev.Value, svcJSON(102)) || !bytes.Equal(ev.PrevValue, svcJSON(101)) {
		t.Fatalf("replayed update: %+v", ev)
	}
	rd, err := l.Delete(c, key, r2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, replay); ev.Type != EventDelete || ev.Rev != rd || !bytes.Equal(ev.Value, svcJSON(102)) || !bytes.Equal(ev.PrevValue, svcJSON(102)) {
		t.Fatalf("live delete: %+v", ev)
	}
	again, err := l.Watch(c, "core/services/bench/", WatchOptions{FromRev: r2})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Stop()
	if ev := next(t, again); ev.Type != EventDelete || !bytes.Equal(ev.Value, svcJSON(102)) || !bytes.Equal(ev.PrevValue, svcJSON(102)) {
		t.Fatalf("replayed delete: %+v", ev)
	}
}

// A value the kind's dictionary cannot shrink, a tiny one, an empty one and nil all come back
// as they were; only the first ones seed the dictionary.
func TestKeepUnpacksWhatItKept(t *testing.T) {
	p := newPacker()
	const key = "core/services/ns/x"
	for i := range 40 {
		p.keep(key, svcJSON(i))
	}
	if p.dict(kindOf(key)) == nil {
		t.Fatal("no dictionary after 40 Services")
	}
	for _, v := range [][]byte{svcJSON(500), incompressible(700), []byte("x"), {}, nil} {
		kept := p.keep(key, v)
		if got := p.unpack(key, kept); !bytes.Equal(got, v) || (v == nil) != (got == nil) {
			t.Fatalf("value of %d bytes came back as %d bytes", len(v), len(got))
		}
	}
	if kept := p.keep(key, incompressible(700)); kept[0] != keptPlain {
		t.Fatal("a value the dictionary cannot shrink was packed")
	}
	if kept := p.keep(key, svcJSON(501)); kept[0] != keptDict || len(kept) > len(svcJSON(501))/3 {
		t.Fatalf("a Service kept in %d of %d bytes (tag %d)", len(kept), len(svcJSON(501)), kept[0])
	}
}

var incompressibleSeed atomic.Uint64

// incompressible is n bytes that S2 cannot shrink, new ones on every call (a value seen
// before would pack against a dictionary it seeded).
func incompressible(n int) []byte {
	r := rand.New(rand.NewPCG(incompressibleSeed.Add(1), 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}
