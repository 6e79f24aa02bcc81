package statelog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// A filtered view (Config.Only) holds a few kinds of the log: its consumer asks JetStream for
// their subjects alone, so the process neither receives nor keeps the others. The revision
// of such a view moves with its own kinds' messages only; what "the view has applied
// revision N" means for it is that it holds every message of its kinds up to N, which reach
// establishes from the stream's state (see reach).

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

// reach waits until a filtered view holds every message of its kinds up to rev, a revision the
// stream is known to hold, and then raises the view's revision to rev.
//
// The consumer skips other kinds' sequences, so the view's revision cannot tell by itself.
// The stream can: the view holds its kinds' messages up to its revision cur (they arrive in
// order, and a raise only ever passes sequences of other kinds), so when the stream's leader has
// no message on the view's subjects after cur up to rev, there is nothing between to wait for.
// The consumer's own count (NumPending) cannot say this: the server stores a message before it
// tells the consumers (through a queue another goroutine drains), and a view raised in between
// dropped the message when it came, its sequence below the view's, as a redelivery.
func (l *Log) reach(ctx context.Context, rev uint64) error {
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
		if next, err := l.nextOfKinds(ctx, cur+1); err == nil && (next == 0 || next > rev) {
			l.applyMu.Lock()
			l.view.applyOther(rev, 0)
			l.applyMu.Unlock()
			return nil
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

// nextOfKinds is the first sequence at or after seq of a message on the view's subjects, as the
// stream's leader has it; 0 when there is none.
func (l *Log) nextOfKinds(ctx context.Context, seq uint64) (uint64, error) {
	var first uint64
	for _, subj := range l.filters {
		next, err := l.leaderNext(ctx, seq, subj)
		if err != nil {
			return 0, err
		}
		if next != 0 && (first == 0 || next < first) {
			first = next
		}
	}
	return first, nil
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
