package statelog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	hdrOp      = "Skiff-Op" // "del" marks a tombstone
	opDelete   = "del"
	metaMark   = "compact"
	casRetries = 16
)

// Log is one client of the state stream with its own in-memory view.
type Log struct {
	cfg      Config
	js       jetstream.JetStream
	st       jetstream.Stream
	leader   nats.JetStreamContext // reads for writes' CAS decisions (leader.go)
	keyBase  string                // <prefix>.k
	filters  []string              // the consumer's subject filters of Config.Only (filter.go)
	markSubj string                // <prefix>.m.compact
	view     *view
	feed     feed // the view's consumer (slots.go)
	closed   atomic.Bool
	stop     chan struct{}
	wg       sync.WaitGroup

	own   ownWrites // acknowledged writes the view may not have yet (ryw.go)
	stale sync.Map  // keys whose stored form the Transformer no longer writes (transform.go)

	errMu   sync.Mutex
	lastErr error
	// applyMu orders the two ways messages reach the view: the consumer and catchUp.
	applyMu sync.Mutex
	budget  timeBudget // how long full watchers may still hold up applying (dispatch.go)
}

// Open creates the stream if needed (unless cfg.ReadOnly), replays it into the view and returns
// once the view has caught up with the stream's last sequence at Open.
func Open(ctx context.Context, nc *nats.Conn, cfg Config) (*Log, error) {
	cfg.defaults()
	filters, err := onlySubjects(cfg.Prefix, cfg.Only)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	st, err := openStream(ctx, js, cfg)
	if err != nil {
		return nil, fmt.Errorf("statelog: stream %s: %w", cfg.Stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, err
	}
	leader, err := nc.JetStream()
	if err != nil {
		return nil, err
	}
	l := &Log{
		cfg:      cfg,
		js:       js,
		st:       st,
		leader:   leader,
		keyBase:  cfg.Prefix + ".k",
		filters:  filters,
		markSubj: cfg.Prefix + ".m." + metaMark,
		view:     newView(cfg),
		stop:     make(chan struct{}),
	}
	l.own.keys = map[string]uint64{}
	if info.State.Msgs == 0 {
		// Nothing to replay, but revisions continue from the last sequence.
		l.view.rev = info.State.LastSeq
	}
	if l.feed, err = l.openFeed(ctx); err != nil {
		return nil, err
	}
	wait := l.WaitForRev
	if l.partial() {
		wait = l.reach // its kinds may have no message at the last sequence
	}
	if err := wait(ctx, info.State.LastSeq); err != nil {
		l.Close()
		return nil, err
	}
	if cfg.HistoryFromOpen {
		l.view.startHistory()
	}
	l.wg.Add(1)
	go l.bookmarkLoop()
	return l, nil
}

// openFeed starts the view's consumer: on a name of Config.ConsumerNames when given, else an
// ordered consumer.
func (l *Log) openFeed(ctx context.Context) (feed, error) {
	if len(l.cfg.ConsumerNames) > 0 {
		return l.openSlot(ctx, l.cfg.ConsumerNames)
	}
	cons, err := l.st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy, FilterSubjects: l.filters})
	if err != nil {
		return nil, err
	}
	cc, err := cons.Consume(l.handle, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		l.errMu.Lock()
		l.lastErr = err
		l.errMu.Unlock()
	}), jetstream.PullExpiry(pullExpiry), jetstream.PullHeartbeat(pullHeartbeat))
	if err != nil {
		return nil, err
	}
	return cc, nil
}

// openStream creates the stream or opens the existing one; read-only, only opens it.
func openStream(ctx context.Context, js jetstream.JetStream, cfg Config) (jetstream.Stream, error) {
	if cfg.ReadOnly {
		return js.Stream(ctx, cfg.Stream)
	}
	storage := jetstream.FileStorage
	if cfg.Memory {
		storage = jetstream.MemoryStorage
	}
	sc := jetstream.StreamConfig{
		Name:              cfg.Stream,
		Subjects:          []string{cfg.Prefix + ".>"},
		Storage:           storage,
		Replicas:          cfg.Replicas,
		Retention:         jetstream.LimitsPolicy,
		MaxMsgsPerSubject: -1, // history stays until Compact
		AllowDirect:       true,
		DenyDelete:        true,
	}
	st, err := js.CreateStream(ctx, sc)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		st, err = js.Stream(ctx, cfg.Stream)
	}
	return st, err
}

func (l *Log) handle(m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return
	}
	l.applyMu.Lock()
	defer l.applyMu.Unlock()
	l.apply(md.Sequence.Stream, m.Subject(), m.Headers(), m.Data(), md.Timestamp)
}

func (l *Log) apply(seq uint64, subj string, h nats.Header, data []byte, at time.Time) {
	if strings.HasPrefix(subj, l.keyBase+".") {
		key, err := subjectKey(l.keyBase, subj)
		// catchUp reads every sequence; a filtered view skips other kinds' as its consumer does.
		if err == nil && l.Holds(key) {
			del := h.Get(hdrOp) == opDelete
			var keep Header
			if !l.cfg.DropHeaders {
				keep = fromNATSHeader(h)
			}
			ev, blocked := l.view.applyKey(seq, key, del, l.fromStorage(key, data, del), keep, at)
			l.settle(key, seq)
			if len(blocked) > 0 {
				l.deliverBlocked(ev, blocked)
			}
			return
		}
	}
	var mark uint64
	if subj == l.markSubj {
		mark, _ = strconv.ParseUint(string(data), 10, 64)
	}
	l.view.applyOther(seq, mark)
}

// catchUpAfter is how long a wait for a revision that is known to exist trusts the consumer
// before reading the missing messages itself.
const catchUpAfter = time.Second

// catchUp reads the messages up to target (which must exist in the stream) one by one and
// applies them. The view's consumer lives on one server of a cluster: when that server dies,
// the consumer is recreated only after missed heartbeats and a create that can time out
// (10 s a try), while any live server answers a get at once. A sequence that is gone was
// compacted away (superseded), so it only advances the revision.
func (l *Log) catchUp(ctx context.Context, target uint64) error {
	l.applyMu.Lock()
	defer l.applyMu.Unlock()
	for seq := l.applied() + 1; seq <= target; seq++ {
		m, err := l.st.GetMsg(ctx, seq)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			l.view.applyOther(seq, 0)
		case err != nil:
			return err
		default:
			l.apply(seq, m.Subject, m.Header, m.Data, m.Time)
		}
	}
	return nil
}

// waitForExisting waits until the view has applied rev, a revision the stream is known to
// hold (a write's ack, the stream's last sequence), catching up directly if the consumer lags.
func (l *Log) waitForExisting(ctx context.Context, rev uint64) error {
	if l.partial() {
		return l.reach(ctx, rev)
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, catchUpAfter)
		err := l.waitApplied(wctx, rev)
		cancel()
		if err == nil || ctx.Err() != nil || errors.Is(err, ErrClosed) {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = l.catchUp(cctx, rev)
		cancel()
		if err == nil {
			return l.waitApplied(ctx, rev)
		}
	}
}

func (l *Log) bookmarkLoop() {
	defer l.wg.Done()
	// Ticking at half the interval keeps every watcher within one interval.
	t := time.NewTicker(l.cfg.BookmarkInterval / 2)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			l.view.bookmark()
			l.sweep()
		case <-l.stop:
			return
		}
	}
}

// Close stops the view and ends all watches with ErrClosed. It does not
// close the NATS connection.
func (l *Log) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	close(l.stop)
	l.wg.Wait()
	l.feed.Stop()
	v := l.view
	v.mu.Lock()
	for w := range v.watchers {
		v.removeWatcher(w)
		w.finish(ErrClosed)
	}
	v.mu.Unlock()
	return nil
}

// ConsumerErr is the last error the view's consumer reported (diagnostics).
func (l *Log) ConsumerErr() error {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	return l.lastErr
}

// CompactedRev is the revision below which history is gone.
func (l *Log) CompactedRev() uint64 {
	l.view.mu.RLock()
	defer l.view.mu.RUnlock()
	return l.view.compacted
}

// OldestWatchRev is the lowest revision a watch may start from: the compaction mark, or the
// oldest event the history's byte bound still keeps.
func (l *Log) OldestWatchRev() uint64 {
	l.view.mu.RLock()
	defer l.view.mu.RUnlock()
	return l.view.oldestWatchRev()
}

// WaitForRev waits until the view has applied rev. A revision this Log wrote is known to
// exist, so for one the view is caught up from the stream if its consumer lags.
func (l *Log) WaitForRev(ctx context.Context, rev uint64) error {
	if rev <= l.own.acked.Load() {
		return l.waitForExisting(ctx, rev)
	}
	if l.partial() {
		return l.waitFiltered(ctx, rev)
	}
	return l.waitApplied(ctx, rev)
}

func (l *Log) waitApplied(ctx context.Context, rev uint64) error {
	v := l.view
	for {
		v.mu.RLock()
		cur, ch := v.rev, v.changed
		v.mu.RUnlock()
		if cur >= rev {
			return nil
		}
		if l.closed.Load() {
			return ErrClosed
		}
		select {
		case <-ch:
		case <-l.stop:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitRead waits until the view is as fresh as o asks and holds own, the highest revision
// of this Log's acknowledged writes the read could see.
func (l *Log) waitRead(ctx context.Context, o ReadOptions, own uint64) error {
	known := own // a revision the stream is known to hold
	if o.Consistent {
		info, err := l.st.Info(ctx)
		if err != nil {
			return err
		}
		known = max(known, info.State.LastSeq)
	}
	if known > l.applied() {
		if err := l.waitForExisting(ctx, known); err != nil {
			return err
		}
	}
	if o.MinRev > l.applied() {
		return l.WaitForRev(ctx, o.MinRev)
	}
	return nil
}

// Get returns the live value of key. It sees every write of key this Log has returned from.
func (l *Log) Get(ctx context.Context, key string, o ReadOptions) (Entry, error) {
	if err := l.mustHold(key); err != nil {
		return Entry{}, err
	}
	if err := l.waitRead(ctx, o, l.ownUnder(key, true)); err != nil {
		return Entry{}, err
	}
	e, _, ok := l.view.get(key)
	if !ok {
		return Entry{}, ErrNotFound
	}
	return e, nil
}

// List returns the live entries whose key starts with prefix, sorted by
// key, and the revision the list reflects. It sees every write under prefix this Log has
// returned from.
func (l *Log) List(ctx context.Context, prefix string, o ReadOptions) ([]Entry, uint64, error) {
	if err := l.mustHold(prefix); err != nil {
		return nil, 0, err
	}
	if err := l.waitRead(ctx, o, l.ownUnder(prefix, false)); err != nil {
		return nil, 0, err
	}
	es, rev := l.view.list(prefix)
	return es, rev, nil
}
