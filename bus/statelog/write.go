package statelog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var errWrongLast = errors.New("statelog: wrong last subject sequence")

// publish appends a message on subj (key's, or "" outside the key space) if the subject's
// last sequence is expect (0: the subject has no message). It returns at JetStream's ack,
// and once Config.Sync has synced it: the write is durable then, and this Log's reads that
// could see it wait for the view to apply it (ryw.go), so no write waits for its own
// read-back.
func (l *Log) publish(ctx context.Context, key, subj string, data []byte, h Header, del bool, expect uint64) (rev uint64, err error) {
	if l.closed.Load() {
		return 0, ErrClosed
	}
	defer func(start time.Time) { observeWrite(del, start, err) }(time.Now())
	if err := l.roomFor(ctx, del); err != nil {
		return 0, err
	}
	if data, err = l.toStorage(key, data); err != nil {
		return 0, err
	}
	m := &nats.Msg{Subject: subj, Data: data, Header: toNATSHeader(h)}
	if del {
		m.Header[hdrOp] = []string{opDelete}
	}
	ack, err := l.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(expect))
	if err != nil {
		var ae *jetstream.APIError
		if errors.As(err, &ae) && (ae.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			ae.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return 0, errWrongLast
		}
		if storageLimit(err) {
			return 0, fmt.Errorf("%w: %w", ErrInsufficientStorage, err)
		}
		return 0, err
	}
	// Recorded before the sync: the stream holds it, so this Log's reads must see it.
	l.noteAcked(key, ack.Sequence)
	if l.cfg.Sync != nil {
		if err := l.cfg.Sync.Sync(ctx); err != nil {
			return 0, fmt.Errorf("statelog: stored at %d but not synced: %w", ack.Sequence, err)
		}
	}
	return ack.Sequence, nil
}

// lastFor asks the stream's leader for the subject's last message.
func (l *Log) lastFor(ctx context.Context, subj string) (seq uint64, live bool, err error) {
	m, err := l.leaderLast(ctx, subj)
	if m == nil || err != nil {
		return 0, false, err
	}
	return m.Sequence, m.Header.Get(hdrOp) != opDelete, nil
}

// isTombstone reports whether rev is a tombstone of subj. The CAS alone
// cannot tell: expecting a tombstone's sequence succeeds.
func (l *Log) isTombstone(ctx context.Context, key, subj string, rev uint64) (bool, error) {
	liveRev, tombRev := l.view.state(key)
	if liveRev == rev {
		return false, nil
	}
	if tombRev == rev {
		return true, nil
	}
	if rev <= l.applied() {
		return false, nil // not this key's latest write: the CAS fails anyway
	}
	m, err := l.leaderMsg(ctx, rev)
	if m == nil || err != nil {
		return false, err
	}
	return m.Subject == subj && m.Header.Get(hdrOp) == opDelete, nil
}

// Create writes key if it is not live; ErrExists otherwise. Neither Create nor Update keeps
// value once it returns (the NATS client copies what it publishes): the caller may reuse it.
func (l *Log) Create(ctx context.Context, key string, value []byte, h Header) (uint64, error) {
	if l.cfg.ReadOnly {
		return 0, ErrReadOnly
	}
	if err := l.mustHold(key); err != nil {
		return 0, err
	}
	subj, err := keySubject(l.keyBase, key)
	if err != nil {
		return 0, err
	}
	// The view's state is the CAS's first guess; with this Log's own last write of key in it
	// the guess is right without a failed publish and a lookup.
	if err := l.waitOwn(ctx, key, true); err != nil {
		return 0, err
	}
	liveRev, expect := l.view.state(key)
	if liveRev != 0 {
		// The view may be behind a delete; ask the stream.
		seq, live, err := l.lastFor(ctx, subj)
		if err != nil {
			return 0, err
		}
		if live {
			return 0, ErrExists
		}
		expect = seq
	}
	for range casRetries {
		rev, err := l.publish(ctx, key, subj, value, h, false, expect)
		if !errors.Is(err, errWrongLast) {
			return rev, err
		}
		seq, live, err := l.lastFor(ctx, subj)
		if err != nil {
			return 0, err
		}
		if live {
			return 0, ErrExists
		}
		expect = seq
	}
	return 0, ErrConflict
}

// Update replaces the live value of key if its revision is expectedRev
// (ErrConflict otherwise, ErrNotFound if the key is not live). expectedRev 0
// means unconditional (the key must still be live).
func (l *Log) Update(ctx context.Context, key string, value []byte, expectedRev uint64, h Header) (uint64, error) {
	return l.change(ctx, key, value, expectedRev, h, false)
}

// Delete writes a tombstone for key if its revision is expectedRev (0:
// unconditional). The delete event carries the last value.
func (l *Log) Delete(ctx context.Context, key string, expectedRev uint64, h Header) (uint64, error) {
	return l.change(ctx, key, nil, expectedRev, h, true)
}

func (l *Log) change(ctx context.Context, key string, value []byte, expectedRev uint64, h Header, del bool) (uint64, error) {
	if l.cfg.ReadOnly {
		return 0, ErrReadOnly
	}
	if err := l.mustHold(key); err != nil {
		return 0, err
	}
	subj, err := keySubject(l.keyBase, key)
	if err != nil {
		return 0, err
	}
	unconditional := expectedRev == 0
	if !unconditional {
		// isTombstone asks the view first, which then knows this Log's last write of key.
		if err := l.waitOwn(ctx, key, true); err != nil {
			return 0, err
		}
	}
	for range casRetries {
		if unconditional {
			seq, live, err := l.lastFor(ctx, subj)
			if err != nil {
				return 0, err
			}
			if !live {
				return 0, ErrNotFound
			}
			expectedRev = seq
		} else if tomb, err := l.isTombstone(ctx, key, subj, expectedRev); err != nil {
			return 0, err
		} else if tomb {
			return 0, ErrNotFound
		}
		rev, err := l.publish(ctx, key, subj, value, h, del, expectedRev)
		if !errors.Is(err, errWrongLast) {
			return rev, err
		}
		if unconditional {
			continue
		}
		_, live, err := l.lastFor(ctx, subj)
		if err != nil {
			return 0, err
		}
		if !live {
			return 0, ErrNotFound
		}
		return 0, ErrConflict
	}
	return 0, ErrConflict
}
