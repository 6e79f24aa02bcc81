// Package lease elects one leader per name through a JetStream KV bucket.
//
// A record holds the holder's identity, its ttl and an expiry time; every
// change goes through CAS on the KV revision. Contenders do not trust the
// holder's clock: they take over once the record's revision has not moved
// for ttl by their own clock (as client-go's leader election does). The
// holder gives up when it has not renewed within RenewDeadline (3/4 ttl),
// so it stops before any contender can start.
package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Bucket is the KV bucket holding leases.
const Bucket = "leases"

// Record is the value stored per lease name.
type Record struct {
	Holder   string        `json:"holder"`
	TTL      time.Duration `json:"ttl"`
	Acquired time.Time     `json:"acquired"`
	Renewed  time.Time     `json:"renewed"`
	Expires  time.Time     `json:"expires"` // holder's clock; informational
}

// Config configures the bucket.
type Config struct {
	Replicas int  // default 1
	Memory   bool // memory storage (tests)
}

// Elector runs elections in the lease bucket.
type Elector struct {
	kv jetstream.KeyValue
}

// New creates the bucket if needed.
func New(ctx context.Context, nc *nats.Conn, cfg Config) (*Elector, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	storage := jetstream.FileStorage
	if cfg.Memory {
		storage = jetstream.MemoryStorage
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: Bucket, History: 1, Storage: storage, Replicas: max(cfg.Replicas, 1)})
	if errors.Is(err, jetstream.ErrBucketExists) {
		kv, err = js.KeyValue(ctx, Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("lease: bucket: %w", err)
	}
	return &Elector{kv: kv}, nil
}

// Holder returns the current record for name (jetstream.ErrKeyNotFound if none).
func (e *Elector) Holder(ctx context.Context, name string) (Record, uint64, error) {
	ent, err := e.kv.Get(ctx, name)
	if err != nil {
		return Record{}, 0, err
	}
	var r Record
	return r, ent.Revision(), json.Unmarshal(ent.Value(), &r)
}

// Run campaigns for name until ctx ends. While leading, onStart runs in its
// own goroutine with a context that ends when leadership ends; onStop runs
// after onStart has returned. Leadership can be won and lost many times.
// On ctx end a leader releases the lease so a contender takes over at once.
// Run returns ctx.Err() or a non-transient error (e.g. a closed connection).
func (e *Elector) Run(ctx context.Context, name, identity string, ttl time.Duration, onStart func(ctx context.Context), onStop func()) error {
	if ttl <= 0 || identity == "" {
		return errors.New("lease: need an identity and a positive ttl")
	}
	for {
		rev, acquired, err := e.campaign(ctx, name, identity, ttl)
		if err != nil {
			return err
		}
		if err := e.lead(ctx, name, identity, ttl, rev, acquired, onStart, onStop); err != nil {
			return err
		}
	}
}

func (e *Elector) record(identity string, ttl time.Duration, acquired, now time.Time) []byte {
	b, _ := json.Marshal(Record{Holder: identity, TTL: ttl, Acquired: acquired, Renewed: now, Expires: now.Add(ttl)})
	return b
}

func fatal(err error) bool {
	return errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, jetstream.ErrBucketNotFound)
}

// campaign waits until this identity holds the lease; it returns the
// record's revision and the time the winning request started.
func (e *Elector) campaign(ctx context.Context, name, identity string, ttl time.Duration) (uint64, time.Time, error) {
	w, err := e.kv.Watch(ctx, name)
	if err != nil {
		return 0, time.Time{}, err
	}
	defer w.Stop()
	var (
		cur      jetstream.KeyValueEntry
		seen     time.Time // when cur was first observed, by our clock
		ready    bool
		timer    = time.NewTimer(time.Hour)
		retryGap = max(ttl/10, 10*time.Millisecond)
	)
	defer timer.Stop()
	for {
		select {
		case ent, ok := <-w.Updates():
			if !ok {
				return 0, time.Time{}, errors.New("lease: watch ended")
			}
			if ent == nil {
				ready = true
			} else {
				cur, seen = ent, time.Now()
				if ent.Operation() != jetstream.KeyValuePut {
					cur = nil
				}
			}
			if !ready {
				continue
			}
		case <-timer.C:
		case <-ctx.Done():
			return 0, time.Time{}, ctx.Err()
		}
		start := time.Now()
		var rev uint64
		var err error
		switch {
		case cur == nil:
			rev, err = e.kv.Create(ctx, name, e.record(identity, ttl, start, start))
		default:
			var r Record
			if json.Unmarshal(cur.Value(), &r) != nil || r.TTL <= 0 {
				r.TTL = ttl // unreadable record: treat as expired after our ttl
			}
			if wait := r.TTL - time.Since(seen); r.Holder != identity && wait > 0 {
				timer.Reset(wait)
				continue
			}
			rev, err = e.kv.Update(ctx, name, e.record(identity, ttl, start, start), cur.Revision())
		}
		if err == nil {
			return rev, start, nil
		}
		if fatal(err) || ctx.Err() != nil {
			return 0, time.Time{}, errors.Join(err, ctx.Err())
		}
		// Lost the race (the watch brings the winner) or a transient error.
		timer.Reset(retryGap)
	}
}

// lead keeps the lease renewed until ctx ends or a renewal cannot be made
// within the renew deadline.
func (e *Elector) lead(ctx context.Context, name, identity string, ttl time.Duration, rev uint64, acquired time.Time,
	onStart func(context.Context), onStop func()) error {
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		onStart(lctx)
	}()
	stepDown := func() {
		cancel()
		<-done
		onStop()
	}
	renewDeadline := ttl * 3 / 4
	lastRenew := acquired
	tick := time.NewTicker(ttl / 4)
	defer tick.Stop()
	deadline := time.NewTimer(renewDeadline)
	defer deadline.Stop()
	for {
		select {
		case <-ctx.Done():
			stepDown()
			// Release so a contender need not wait out the ttl.
			rctx, rcancel := context.WithTimeout(context.Background(), ttl)
			_ = e.kv.Delete(rctx, name, jetstream.LastRevision(rev))
			rcancel()
			return ctx.Err()
		case <-deadline.C:
			stepDown()
			return nil
		case <-tick.C:
			start := time.Now()
			rctx, rcancel := context.WithDeadline(ctx, lastRenew.Add(renewDeadline))
			nrev, err := e.kv.Update(rctx, name, e.record(identity, ttl, acquired, start), rev)
			rcancel()
			switch {
			case err == nil:
				rev, lastRenew = nrev, start
				deadline.Reset(time.Until(lastRenew.Add(renewDeadline)))
			case errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyNotFound):
				stepDown() // someone else holds it now
				return nil
			case fatal(err):
				stepDown()
				return err
			}
		}
	}
}
