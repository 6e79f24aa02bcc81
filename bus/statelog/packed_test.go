package statelog

import (
	"errors"
	"fmt"
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
	r := e.open(Config{ReadOnly: true, PackValues: true})
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
		if it.packed {
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
	r := e.open(Config{ReadOnly: true, PackValues: true, HistoryFromOpen: true})
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
