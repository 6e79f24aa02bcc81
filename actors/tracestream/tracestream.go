// Package tracestream keeps the span store's traces in a JetStream stream (TRACES, bounded by
// age and bytes) instead of in one process's memory: each apiserver replica publishes the spans
// it is handed and feeds its store from the whole stream, so every replica serves the same
// traces and `skiff trace` finds an apply from before a restart.
package tracestream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/internal/spanstore"
)

// Config names the stream and its bounds.
type Config struct {
	Conn     *nats.Conn
	Store    *spanstore.Store
	Stream   string        // default "TRACES", subjects <stream lowercased>.>
	MaxAge   time.Duration // default 24 h
	MaxBytes int64         // default 256 MiB
	Logger   *slog.Logger
}

func (c *Config) defaults() {
	if c.Stream == "" {
		c.Stream = "TRACES"
	}
	if c.MaxAge <= 0 {
		c.MaxAge = 24 * time.Hour
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 256 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Batching: a message carries the spans of up to flushEvery, at most maxBatchBytes of JSON
// (well under NATS's payload limit), so a busy process publishes tens of messages a second.
const (
	flushEvery    = 100 * time.Millisecond
	maxBatchBytes = 256 << 10
	queued        = 4096 // span slices waiting for the publisher; beyond it spans are dropped
)

// NewActor returns the producer of the actor that owns the stream for cfg.Store. From now on
// the store's spans queue for the stream (while the actor starts or restarts too); what it has
// read survives its restarts, so a new incarnation resumes after the last message applied.
func NewActor(cfg Config) func() actorkit.Actor {
	cfg.defaults()
	s := &shared{cfg: cfg, spans: make(chan []spanstore.Span, queued)}
	cfg.Store.SetSink(s.enqueue)
	return func() actorkit.Actor { return &streamActor{s: s} }
}

type shared struct {
	cfg   Config
	spans chan []spanstore.Span
	// applied is the last stream sequence fed to the store; only the consumer goroutine of
	// the live incarnation touches it.
	applied uint64
}

type streamActor struct{ s *shared }

func (a *streamActor) Receive(ctx actorkit.Context) {
	if _, ok := ctx.Message().(*actorkit.Started); ok {
		a.start(ctx)
	}
}

func (a *streamActor) start(actx actorkit.Context) {
	s := a.s
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(s.cfg.Conn)
	if err != nil {
		panic(err) // the supervisor retries with back-off
	}
	st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        s.cfg.Stream,
		Description: "recent trace spans for skiff trace",
		Subjects:    []string{s.subject() + ".>"},
		Storage:     jetstream.FileStorage,
		MaxAge:      s.cfg.MaxAge,
		MaxBytes:    s.cfg.MaxBytes,
		Discard:     jetstream.DiscardOld,
	})
	if err != nil {
		panic(fmt.Errorf("trace stream %s: %w", s.cfg.Stream, err))
	}
	actorkit.Go(actx, "trace stream reader", func(ctx context.Context) { s.read(ctx, st) })
	actorkit.Go(actx, "trace stream writer", func(ctx context.Context) { s.write(ctx, js) })
}

// subject is the stream's subject prefix: its name lowercased, so two streams never share one.
func (s *shared) subject() string { return strings.ToLower(s.cfg.Stream) }

// enqueue is the store's sink: it never blocks a traced request.
func (s *shared) enqueue(spans []spanstore.Span) {
	select {
	case s.spans <- spans:
	default:
		dropped.Add(float64(len(spans)))
	}
}

// write publishes batches until ctx ends, then the batch it holds; what is still queued waits
// for the next incarnation.
func (s *shared) write(ctx context.Context, js jetstream.JetStream) {
	tick := time.NewTicker(flushEvery)
	defer tick.Stop()
	var batch []spanstore.Span
	size := 0
	flush := func() {
		if len(batch) == 0 {
			return
		}
		body, err := json.Marshal(batch)
		if err == nil {
			// Not ctx: the last batch is published after it ended.
			pctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err = js.Publish(pctx, s.subject()+".spans", body)
			cancel()
		}
		if err != nil {
			// A lost batch of spans is not worth failing the actor over: traces are best effort.
			s.cfg.Logger.Warn("trace stream: publish failed", "spans", len(batch), "err", err)
			dropped.Add(float64(len(batch)))
		}
		batch, size = batch[:0], 0
	}
	for {
		select {
		case <-ctx.Done():
			flush()
			return
		case spans := <-s.spans:
			batch = append(batch, spans...)
			for _, sp := range spans {
				size += approxSize(sp)
			}
			if size >= maxBatchBytes {
				flush()
			}
		case <-tick.C:
			flush()
		}
	}
}

func approxSize(sp spanstore.Span) int {
	n := 200 + len(sp.Name)
	for k, v := range sp.Attributes {
		n += len(k) + len(v) + 6
	}
	return n
}

// read feeds the store from the stream, from after the last message applied.
func (s *shared) read(ctx context.Context, st jetstream.Stream) {
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if s.applied > 0 {
		cfg = jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: s.applied + 1}
	}
	cons, err := st.OrderedConsumer(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		panic(fmt.Errorf("trace stream consumer: %w", err))
	}
	msgs, err := cons.Messages()
	if err != nil {
		panic(fmt.Errorf("trace stream consumer: %w", err))
	}
	defer msgs.Stop()
	for {
		msg, err := msgs.Next(jetstream.NextContext(ctx))
		if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return
		}
		if err != nil {
			panic(fmt.Errorf("trace stream consumer: %w", err))
		}
		var spans []spanstore.Span
		if err := json.Unmarshal(msg.Data(), &spans); err != nil {
			s.cfg.Logger.Warn("trace stream: undecodable message skipped", "err", err)
		} else {
			s.cfg.Store.Add(spans...)
		}
		if md, err := msg.Metadata(); err == nil {
			s.applied = md.Sequence.Stream
		}
	}
}
