package nodeheartbeat

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestSpreadRegistersAtOnceThenSpreadsRenewals: every name comes first without waiting, then
// each once per interval, and the renewals are spaced out over the interval (no burst).
func TestSpreadRegistersAtOnceThenSpreadsRenewals(t *testing.T) {
	const n, interval = 50, 200 * time.Millisecond
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprint("n", i)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan string)
	go Spread(ctx, names, interval, out)

	start := time.Now()
	for i := 0; i < n; i++ {
		if got := <-out; got != names[i] {
			t.Fatalf("registration %d: got %s", i, got)
		}
	}
	if d := time.Since(start); d > interval/2 {
		t.Fatalf("registration of %d names took %v", n, d)
	}
	last := map[string]time.Time{}
	var prev time.Time
	var maxGap time.Duration
	for i := 0; i < 3*n; i++ {
		name := <-out
		now := time.Now()
		if i > 0 {
			maxGap = max(maxGap, now.Sub(prev))
		}
		prev = now
		if seen, ok := last[name]; ok {
			if d := now.Sub(seen); d < interval*8/10 || d > interval*12/10 {
				t.Fatalf("%s renewed after %v, want about %v", name, d, interval)
			}
		}
		last[name] = now
	}
	if len(last) != n {
		t.Fatalf("%d of %d names renewed", len(last), n)
	}
	// Evenly spread: consecutive renewals interval/n (4 ms) apart, not a burst and a long pause.
	if maxGap > interval/5 {
		t.Fatalf("largest pause between renewals %v: not spread over the interval", maxGap)
	}
}

// TestSpreadRenewsBeforeRegistering: with one slow worker, a name whose renewal is due goes
// before names still waiting to register, so an early lease never waits for the whole fleet.
func TestSpreadRenewsBeforeRegistering(t *testing.T) {
	const interval = 50 * time.Millisecond
	names := []string{"a", "b", "c", "d", "e", "f"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan string)
	go Spread(ctx, names, interval, out)
	registeredAt, renewed := map[string]time.Time{}, map[string]bool{}
	// Workers slower than the renewals need: registering the rest waits, renewing does not.
	for received := 0; received < 20; received++ {
		name := <-out
		if at, ok := registeredAt[name]; ok && !renewed[name] {
			renewed[name] = true
			if d := time.Since(at); d > interval+20*time.Millisecond {
				t.Fatalf("%s first renewed %v after registering", name, d)
			}
		} else if !ok {
			registeredAt[name] = time.Now()
		}
		time.Sleep(30 * time.Millisecond)
	}
	if len(renewed) == 0 {
		t.Fatal("no name renewed")
	}
}
