package statelog

import "context"

// Barrier waits until the view is as fresh as o asks (Consistent: the stream's last sequence)
// and returns the revision it has applied: what a read served from an index that follows the
// view must reflect at least.
func (l *Log) Barrier(ctx context.Context, o ReadOptions) (uint64, error) {
	if err := l.waitRead(ctx, o, l.own.acked.Load()); err != nil {
		return 0, err
	}
	return l.applied(), nil
}
