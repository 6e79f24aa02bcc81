package statelog

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
)

// Compact drops history below rev: every value superseded before rev and
// every tombstone below rev is purged from the stream; each key's state at
// rev stays. The mark is written first (a message on <prefix>.m.compact), so
// a crash mid-purge never lets a watch from an older revision see a gap, and
// a restarted Log still answers ErrExpired.
//
// Compact only rev <= Rev() and well behind every other view: a view that
// is still replaying the purged range skips the purged messages.
func (l *Log) Compact(ctx context.Context, rev uint64) error {
	if l.cfg.ReadOnly {
		return ErrReadOnly
	}
	if l.partial() {
		return fmt.Errorf("%w: compaction plans over every key, the view holds %q", ErrOutsideView, l.cfg.Only)
	}
	if rev <= l.CompactedRev() {
		return nil
	}
	// Rev brings in this Log's own acknowledged writes, so the plan covers every write <= rev.
	if cur := l.Rev(); rev > cur {
		return fmt.Errorf("statelog: compact to %d beyond applied revision %d", rev, cur)
	}
	plan := l.view.compactPlan(rev)
	// Compaction frees space: its mark must fit on a disk too full for growing writes.
	markSeq, err := l.writeMark(Freeing(ctx), rev)
	if err != nil {
		return err
	}
	for key, below := range plan {
		subj, err := keySubject(l.keyBase, key)
		if err != nil {
			continue
		}
		if err := l.st.Purge(ctx, jetstream.WithPurgeSubject(subj), jetstream.WithPurgeSequence(below)); err != nil {
			return fmt.Errorf("statelog: purge %s: %w", key, err)
		}
	}
	// A purge may rewrite old blocks, which the server does not sync.
	if l.cfg.Sync != nil {
		if err := l.cfg.Sync.SyncAll(ctx); err != nil {
			return err
		}
	}
	// Callers expect CompactedRev() to reflect the mark on return.
	return l.WaitForRev(ctx, markSeq)
}

// writeMark raises the durable compaction mark to rev (never lowers it).
func (l *Log) writeMark(ctx context.Context, rev uint64) (uint64, error) {
	for range casRetries {
		m, err := l.leaderLast(ctx, l.markSubj)
		if err != nil {
			return 0, err
		}
		var last, seq uint64
		if m != nil {
			seq = m.Sequence
			last, _ = strconv.ParseUint(string(m.Data), 10, 64)
		}
		if last >= rev {
			return seq, nil
		}
		markSeq, err := l.publish(ctx, "", l.markSubj, []byte(strconv.FormatUint(rev, 10)), nil, false, seq)
		if errors.Is(err, errWrongLast) {
			continue
		}
		if err != nil {
			return 0, err
		}
		// Older marks are noise for a replaying view.
		return markSeq, l.st.Purge(ctx, jetstream.WithPurgeSubject(l.markSubj), jetstream.WithPurgeSequence(markSeq))
	}
	return 0, ErrConflict
}
