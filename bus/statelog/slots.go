package statelog

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A view is fed by one consumer. The writer's Log uses nats.go's ordered consumer (random
// names, recreated under a new name after every gap). A reader on secured NATS may only use
// the consumer names its identity is granted (Config.ConsumerNames), so one identity can
// hold no more consumers than it has names, and touch no one else's: slotFeed is the ordered
// consumer over such a fixed name, recreated under the same name after a gap.

const (
	// slotIdle: the server removes a slot's consumer this long after its reader died.
	slotIdle = 30 * time.Second
	// pullExpiry and pullHeartbeat: when the consumer's server dies only missed heartbeats
	// (two of them) tell, and the view stalls until then: 2s, not the library's 10s.
	pullExpiry    = 3 * time.Second
	pullHeartbeat = time.Second
)

// ErrNoConsumerName is returned by Open when every consumer name of Config.ConsumerNames is
// held by a live reader.
var ErrNoConsumerName = errors.New("statelog: every consumer name of this identity is in use")

// feed is what Close stops.
type feed interface{ Stop() }

type slotFeed struct {
	l      *Log
	st     jetstream.Stream
	names  []string // the identity's, in order
	name   string   // the one held
	marker string   // tells this reader's consumer config from another reader's of the same name
	reset  chan struct{}

	mu   sync.Mutex
	gen  int    // bumped on every recreate; deliveries of older generations are dropped
	last uint64 // consumer sequence of the last delivery of this generation
	cc   jetstream.ConsumeContext
}

// openSlot takes the first free name (or one whose reader is gone) and starts consuming.
func (l *Log) openSlot(ctx context.Context, names []string) (*slotFeed, error) {
	f := &slotFeed{l: l, st: l.st, names: names, marker: rand.Text(), reset: make(chan struct{}, 1)}
	var stale []string
	for _, name := range names {
		err := f.create(ctx, name)
		if err == nil {
			f.name = name
			break
		}
		if !errors.Is(err, jetstream.ErrConsumerExists) {
			return nil, fmt.Errorf("statelog: consumer %s: %w", name, err)
		}
		stale = append(stale, name)
	}
	if f.name == "" {
		name, err := f.takeOverStale(ctx, stale)
		if err != nil {
			return nil, err
		}
		f.name = name
	}
	l.wg.Add(1)
	go f.resetLoop()
	return f, nil
}

// takeOverStale recreates a name whose consumer has had no pull waiting across a pull
// expiry: a live reader always has one, so its reader is gone (a crash before slotIdle).
func (f *slotFeed) takeOverStale(ctx context.Context, names []string) (string, error) {
	idle := map[string]bool{}
	for round := range 2 {
		for _, name := range names {
			c, err := f.st.Consumer(ctx, name)
			if errors.Is(err, jetstream.ErrConsumerNotFound) {
				idle[name] = true
				continue
			}
			if err != nil {
				return "", err
			}
			waiting := c.CachedInfo().NumWaiting > 0
			idle[name] = !waiting && (round == 0 || idle[name])
		}
		if round == 0 {
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(pullExpiry + time.Second):
			}
		}
	}
	for _, name := range names {
		if !idle[name] {
			continue
		}
		_ = f.st.DeleteConsumer(ctx, name)
		if err := f.create(ctx, name); err == nil {
			return name, nil
		}
	}
	return "", fmt.Errorf("%w (%d: %v)", ErrNoConsumerName, len(names), names)
}

// create makes the consumer name start after what the view has applied and consumes it.
func (f *slotFeed) create(ctx context.Context, name string) error {
	cfg := jetstream.ConsumerConfig{Name: name, Description: f.marker, AckPolicy: jetstream.AckNonePolicy,
		MemoryStorage: true, Replicas: 1, InactiveThreshold: slotIdle, DeliverPolicy: jetstream.DeliverAllPolicy,
		FilterSubjects: f.l.filters}
	if next := f.l.applied() + 1; next > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, next
	}
	cons, err := f.st.CreateConsumer(ctx, cfg)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen++
	f.last = 0
	gen := f.gen
	f.cc, err = cons.Consume(func(m jetstream.Msg) { f.deliver(gen, m) },
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { f.failed(gen, err) }),
		jetstream.PullExpiry(pullExpiry), jetstream.PullHeartbeat(pullHeartbeat))
	return err
}

func (f *slotFeed) deliver(gen int, m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return
	}
	f.mu.Lock()
	if gen != f.gen {
		f.mu.Unlock()
		return
	}
	gap := md.Sequence.Consumer != f.last+1
	f.last = md.Sequence.Consumer
	f.mu.Unlock()
	if gap {
		f.requestReset()
		return
	}
	f.l.handle(m)
}

func (f *slotFeed) failed(gen int, err error) {
	f.l.errMu.Lock()
	f.l.lastErr = err
	f.l.errMu.Unlock()
	f.mu.Lock()
	current := gen == f.gen
	f.mu.Unlock()
	if current && (errors.Is(err, jetstream.ErrNoHeartbeat) || errors.Is(err, jetstream.ErrConsumerDeleted) ||
		errors.Is(err, jetstream.ErrConsumerNotFound)) {
		f.requestReset()
	}
}

func (f *slotFeed) requestReset() {
	select {
	case f.reset <- struct{}{}:
	default:
	}
}

// resetLoop recreates the consumer after a gap or a lost consumer: under the same name, or
// when that fails (its server is gone and with it the delete) under a free one of the others;
// it backs off while the stream is unreachable.
func (f *slotFeed) resetLoop() {
	defer f.l.wg.Done()
	for {
		select {
		case <-f.l.stop:
			return
		case <-f.reset:
		}
		for wait := 250 * time.Millisecond; !f.recreate(); wait = min(2*wait, 5*time.Second) {
			select {
			case <-f.l.stop:
				return
			case <-time.After(wait):
			}
		}
	}
}

func (f *slotFeed) recreate() bool {
	f.stopConsume()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = f.st.DeleteConsumer(ctx, f.name)
	if f.create(ctx, f.name) == nil {
		return true
	}
	for _, name := range f.names {
		if name != f.name && f.create(ctx, name) == nil {
			_ = f.st.DeleteConsumer(ctx, f.name)
			f.mu.Lock()
			f.name = name
			f.mu.Unlock()
			return true
		}
	}
	return false
}

func (f *slotFeed) stopConsume() {
	f.mu.Lock()
	cc := f.cc
	f.cc = nil
	f.gen++
	f.mu.Unlock()
	if cc != nil {
		cc.Stop()
	}
}

// Stop ends consumption and removes the consumer, freeing the name at once.
func (f *slotFeed) Stop() {
	f.stopConsume()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = f.st.DeleteConsumer(ctx, f.name)
}
