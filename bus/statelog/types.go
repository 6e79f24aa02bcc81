// Package statelog is Skiff's versioned state log: one JetStream stream,
// revision == stream sequence, with an in-memory view (key index plus an
// event history, like kube-apiserver's watch cache) that serves reads and
// watches. Writes go straight to JetStream with per-subject CAS, so several
// Log instances on one stream stay correct. A write returns at JetStream's ack;
// a read or watch of the same Log that could see it first waits for the view to
// apply it (read-your-writes without a read-back per write).
package statelog

import (
	"context"
	"errors"
	"time"
)

var (
	ErrNotFound = errors.New("statelog: key not found")
	ErrExists   = errors.New("statelog: key already exists")
	ErrConflict = errors.New("statelog: revision conflict")
	ErrExpired  = errors.New("statelog: revision compacted")
	ErrTooSlow  = errors.New("statelog: watcher too slow")
	ErrClosed   = errors.New("statelog: log closed")
	ErrReadOnly = errors.New("statelog: log opened read-only")
	ErrInvalid  = errBadKey
)

// DefaultStream is the stream's name unless Config.Stream says otherwise.
const DefaultStream = "STATE"

// DefaultHistoryBytes is the default bound of a view's event history. Compaction bounds the
// history by age; this bounds it by size, whatever the write rate. It counts values packed
// (packed.go): a lease renewal costs ~420 bytes, so 64 MiB holds about five minutes of 5,000
// nodes' renewals (kube-apiserver's watch cache aims at 75 s), or tens of thousands of pod
// writes; a watcher further behind relists.
const DefaultHistoryBytes = 64 << 20

// Config configures a Log.
type Config struct {
	Stream           string        // default DefaultStream
	Prefix           string        // subject prefix; default "state" (keys under <prefix>.k.>, meta under <prefix>.m.>)
	Replicas         int           // default 1 (3 in a NATS cluster)
	Memory           bool          // memory storage (tests)
	BookmarkInterval time.Duration // default 30s
	WatchBuffer      int           // per-watcher buffer (events), default 1024; full beyond a short wait, the watch ends with ErrTooSlow
	// HistoryBytes bounds the view's event history (the watch cache) besides compaction;
	// default DefaultHistoryBytes. A watch from a revision older than what is kept gets
	// ErrExpired, and its client relists, as with compaction.
	HistoryBytes int64
	// ReadOnly opens an existing stream without creating or updating it, for readers whose
	// NATS permissions allow no more; writes then fail with ErrReadOnly.
	ReadOnly bool
	// Transformer, if set, transforms values on their way to and from the stream
	// (encryption at rest); only the writer and readers holding its keys set one.
	Transformer Transformer
	// ConsumerNames, if set, are the only consumer names the view may use (a reader's NATS
	// permissions grant no others): it takes the first one free (slots.go).
	ConsumerNames []string
	// Sync makes acknowledged writes durable when the server does not fsync them itself (an
	// embedded server: natsserver.StreamSync): a write returns only once Sync has returned
	// after its ack. nil: a write returns at JetStream's ack, and is as durable as the
	// server's sync setting or the stream's replicas make it.
	Sync Syncer
	// Space guards the store's disk (space.go); nil = no check.
	Space Space
	// Only, if set, are the key prefixes (whole tokens ending in "/", e.g. "core/services/")
	// the view holds: its consumer is filtered to their subjects (filter.go), so a reader of a
	// few kinds neither receives nor keeps the others. Reads, watches and writes outside them
	// fail with ErrOutsideView; Compact, which needs every key, is refused.
	Only []string
	// DropHeaders: the view keeps no write headers (the trace context), for readers that
	// start no traced work from what they read; Entry.Header and Event.Header are nil.
	DropHeaders bool
	// HistoryFromOpen: the history starts at the revision Open replayed to, for readers whose
	// watches all start from a snapshot of their own (informers), which never read the
	// replay's events; a watch from before it gets ErrExpired.
	HistoryFromOpen bool
}

// Syncer puts the stream's acknowledged writes on stable storage.
type Syncer interface {
	// Sync returns once every write acknowledged before the call is on stable storage;
	// concurrent calls share one fsync.
	Sync(ctx context.Context) error
	// SyncAll also covers old data the server rewrote (after a purge).
	SyncAll(ctx context.Context) error
}

func (c *Config) defaults() {
	if c.Stream == "" {
		c.Stream = DefaultStream
	}
	if c.Prefix == "" {
		c.Prefix = "state"
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.BookmarkInterval <= 0 {
		c.BookmarkInterval = 30 * time.Second
	}
	if c.WatchBuffer <= 0 {
		c.WatchBuffer = 1024
	}
	if c.HistoryBytes <= 0 {
		c.HistoryBytes = DefaultHistoryBytes
	}
}

// Entry is the live value of a key. Value is shared: do not modify it.
type Entry struct {
	Key    string
	Rev    uint64
	Value  []byte
	Header Header
}

type EventType uint8

const (
	EventPut EventType = iota + 1
	EventDelete
	EventBookmark
)

func (t EventType) String() string {
	switch t {
	case EventPut:
		return "PUT"
	case EventDelete:
		return "DELETE"
	case EventBookmark:
		return "BOOKMARK"
	}
	return "UNKNOWN"
}

// Event is one change seen by a watcher. Byte slices are shared: do not modify.
type Event struct {
	Type      EventType
	Key       string
	Rev       uint64 // revision of this write; for a bookmark the revision the watcher is current to
	Value     []byte // new value (Put); for Delete the last value before the delete
	PrevRev   uint64 // revision of the previous value of the key; 0 for a create
	PrevValue []byte
	Header    Header
	// Time is when the stream stored the write (zero for bookmarks).
	Time time.Time
	// InitialEnd marks the bookmark that closes the initial snapshot of a SendInitial watch.
	InitialEnd bool
}

// ReadOptions controls how fresh a read must be.
type ReadOptions struct {
	MinRev     uint64 // wait until the view has applied at least this revision
	Consistent bool   // learn the stream's last sequence first, then wait until the view has it
}

// WatchOptions selects where a watch starts.
type WatchOptions struct {
	// FromRev > 0: every event with Rev > FromRev, in order; ErrExpired if FromRev <
	// OldestWatchRev() (compacted, or older than the history the size bound keeps).
	FromRev uint64
	// SendInitial: a Put per live key at the current revision R (after
	// waiting for FromRev if set), then a bookmark {Rev: R, InitialEnd: true}.
	SendInitial bool
	// Bookmarks: a bookmark at least every Config.BookmarkInterval.
	Bookmarks bool
}
