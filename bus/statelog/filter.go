package statelog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A filtered view (Config.Only) holds a few kinds of the log: its consumer asks JetStream for
// their subjects alone, so the process neither receives nor keeps the others. The revision
// of such a view moves with its own kinds' messages only; what "the view has applied
// revision N" means for it is that it holds every message of its kinds up to N, which reach
// establishes from its consumer's state (see reach).

// ErrOutsideView is returned for a read, watch or write of keys a filtered view does not hold.
var ErrOutsideView = errors.New("statelog: outside the keys this view holds")

// onlySubjects validates Config.Only and returns the consumer's subject filters: one per
// prefix, and the log's meta subjects (compaction marks), which every view follows.
func onlySubjects(prefix string, only []string) ([]string, error) {
	if len(only) == 0 {
		return nil, nil
	}
	subjects := []string{prefix + ".m.>"}
	for _, p := range only {
		if !strings.HasSuffix(p, "/") {
			return nil, fmt.Errorf("statelog: Config.Only %q: a prefix of whole key tokens must end in \"/\"", p)
		}
		subj, err := keySubject(prefix+".k", strings.TrimSuffix(p, "/"))
		if err != nil {
			return nil, fmt.Errorf("statelog: Config.Only %q: %w", p, err)
		}
		subjects = append(subjects, subj+".>")
	}
	return subjects, nil
}

// Holds reports whether the view holds every key starting with prefix.
func (l *Log) Holds(prefix string) bool {
	if len(l.cfg.Only) == 0 {
		return true
	}
	for _, p := range l.cfg.Only {
		if strings.HasPrefix(prefix, p) {
			return true
		}
	}
	return false
}

// mustHold is holds as an error naming what was asked for.
func (l *Log) mustHold(prefix string) error {
	if l.Holds(prefix) {
		return nil
	}
	return fmt.Errorf("%w: %q (the view holds %q)", ErrOutsideView, prefix, l.cfg.Only)
}

// partial reports whether the view holds only some kinds (Config.Only): its consumer skips the
// stream's other messages, so the stream's sequences alone cannot say what it has applied, and a
// plan over every key (compaction) is not its to make.
func (l *Log) partial() bool { return len(l.filters) > 0 }

// feedInfo is what reach needs of the view's consumer: how far it has delivered, and whether
// anything of the view's kinds is still to come.
type feedInfo interface {
	info(ctx context.Context) (*jetstream.ConsumerInfo, error)
}

// reach waits until a filtered view holds every message of its kinds up to rev, a revision the
// stream is known to hold, and then raises the view's revision to rev.
//
// The consumer skips other kinds' sequences, so the view's revision cannot tell by itself.
// The consumer's info can: with nothing of the view's kinds pending for it (NumPending 0),
// every such message up to the stream's end at that moment (which is at least rev) has been
// delivered, and once the view has applied the last delivery (AckFloor: with no acks it is the
// last delivered sequence; before any delivery, the sequence before the consumer's start),
// none is missing. applyMu keeps a delivery from landing between that check and the raise.
func (l *Log) reach(ctx context.Context, rev uint64) error {
	f, ok := l.feed.(feedInfo)
	if !ok {
		return l.waitApplied(ctx, rev)
	}
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		l.view.mu.RLock()
		cur, changed := l.view.rev, l.view.changed
		l.view.mu.RUnlock()
		if cur >= rev {
			return nil
		}
		if l.closed.Load() {
			return ErrClosed
		}
		if info, err := f.info(ctx); err == nil && info.NumPending == 0 {
			last := info.AckFloor.Stream
			if info.Delivered.Consumer == 0 {
				last = max(info.Config.OptStartSeq, 1) - 1
			}
			l.applyMu.Lock()
			done := l.applied() >= last
			if done {
				l.view.applyOther(rev, 0)
			}
			l.applyMu.Unlock()
			if done {
				return nil
			}
		}
		select {
		case <-changed:
		case <-time.After(wait):
		case <-l.stop:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitFiltered is WaitForRev for a filtered view: rev may not exist yet, so it waits for the
// stream to hold it, then for the view to reach it.
func (l *Log) waitFiltered(ctx context.Context, rev uint64) error {
	for wait := time.Millisecond; l.applied() < rev; wait = min(2*wait, 50*time.Millisecond) {
		info, err := l.st.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.LastSeq >= rev {
			return l.reach(ctx, rev)
		}
		select {
		case <-time.After(wait):
		case <-l.stop:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
