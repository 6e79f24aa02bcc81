package statelog

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrInsufficientStorage is wrapped by a write refused because the store's disk has no room
// for it (Config.Space, or JetStream's own storage limits).
var ErrInsufficientStorage = errors.New("statelog: insufficient storage")

// Space is asked before every write, so that the store's disk never fills up: JetStream's file
// store keeps failing every write after its first "no space left on device" until it is
// reopened. Grow is asked before a write that adds an object or a version (an error refuses
// it), Shrink before one on the way to freeing space (a tombstone, a compaction mark, a write
// marked Freeing), which must still fit when growing writes no longer do. Check reports
// whether growing writes are accepted.
type Space interface {
	Grow() error
	Shrink()
	Check() error
}

type freeingKey struct{}

// Freeing marks the writes made with ctx as part of a deletion (a deletionTimestamp, a
// finalizer removed from an object being deleted): Space lets them through as it does
// tombstones.
func Freeing(ctx context.Context) context.Context { return context.WithValue(ctx, freeingKey{}, true) }

func isFreeing(ctx context.Context) bool { b, _ := ctx.Value(freeingKey{}).(bool); return b }

// roomFor asks Space before a write; del is a tombstone.
func (l *Log) roomFor(ctx context.Context, del bool) error {
	sp := l.cfg.Space
	if sp == nil {
		return nil
	}
	if del || isFreeing(ctx) {
		sp.Shrink()
		return nil
	}
	if err := sp.Grow(); err != nil {
		return fmt.Errorf("%w: %w", ErrInsufficientStorage, err)
	}
	return nil
}

// Writable is nil while the log accepts growing writes: it is not read-only and its Space
// (if any) has room. Readiness probes report it.
func (l *Log) Writable() error {
	if l.cfg.ReadOnly {
		return ErrReadOnly
	}
	if l.cfg.Space == nil {
		return nil
	}
	if err := l.cfg.Space.Check(); err != nil {
		return fmt.Errorf("state log not writable: %w", err)
	}
	return nil
}

// JetStream's error codes (nats-server's jetstream_errors.json) for want of storage.
const (
	jsInsufficientResources    jetstream.ErrorCode = 10023
	jsStorageResourcesExceeded jetstream.ErrorCode = 10047
)

// storageLimit reports JetStream's refusals for want of storage (a server's max_file_store, an
// account's limits), which an external NATS gives instead of Space.
func storageLimit(err error) bool {
	var ae *jetstream.APIError
	return errors.As(err, &ae) && (ae.ErrorCode == jsInsufficientResources || ae.ErrorCode == jsStorageResourcesExceeded)
}
