package controllerkit

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestExpectations(t *testing.T) {
	e := NewExpectations()
	if !e.Satisfied("a") {
		t.Fatal("unknown key must be satisfied")
	}
	e.ExpectCreations("a", 2)
	e.ExpectDeletions("a", []string{"ns/p1"})
	e.CreationObserved("a")
	e.DeletionObserved("a", "ns/p1")
	e.DeletionObserved("a", "ns/p1") // repeated observation of the same deletion: no effect
	if e.Satisfied("a") {
		t.Fatal("one create still outstanding")
	}
	e.CreationObserved("a")
	e.CreationObserved("a") // more observations than expected never go negative
	if !e.Satisfied("a") {
		t.Fatal("all observed")
	}
	e.ExpectCreations("a", 1)
	if adds, _ := e.Pending("a"); adds != 1 {
		t.Fatalf("pending %d, want 1 (no credit from the extra observation)", adds)
	}
	now := time.Now()
	e.now = func() time.Time { return now.Add(ExpectationsTTL + time.Second) }
	if !e.Satisfied("a") {
		t.Fatal("expired expectations count as satisfied")
	}
}

func TestSlowStartBatch(t *testing.T) {
	var calls atomic.Int32
	ok, attempted, err := SlowStartBatch(10, 1, func() error { calls.Add(1); return nil })
	if ok != 10 || attempted != 10 || err != nil || calls.Load() != 10 {
		t.Fatalf("ok=%d attempted=%d err=%v calls=%d", ok, attempted, err, calls.Load())
	}
	// Batches 1, 2, 4: the first failing batch (the third) ends it.
	calls.Store(0)
	ok, attempted, err = SlowStartBatch(100, 1, func() error {
		if calls.Add(1) > 3 {
			return errors.New("quota")
		}
		return nil
	})
	if err == nil || attempted != 7 || ok != 3 {
		t.Fatalf("ok=%d attempted=%d err=%v", ok, attempted, err)
	}
}

func TestQueueBeforeStartIsANoOp(t *testing.T) {
	var q Queue
	q.Add("x")
	q.AddAfter("x", time.Millisecond)
	if q.Len() != 0 {
		t.Fatal("a queue with no incarnation holds nothing")
	}
	cur := q.renew()
	q.Add("x")
	if cur.Len() != 1 {
		t.Fatal("add after renew")
	}
	q.shutDown()
}

func TestKeys(t *testing.T) {
	if ns, n := SplitKey(Key("default", "web")); ns != "default" || n != "web" {
		t.Fatal(ns, n)
	}
	if ns, n := SplitKey(Key("", "node-1")); ns != "" || n != "node-1" {
		t.Fatal(ns, n)
	}
}
