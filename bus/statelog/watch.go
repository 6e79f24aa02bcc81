package statelog

import (
	"context"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Watcher streams events for one key prefix. The view pushes live events
// into in, a buffer of Config.WatchBuffer events; when it stays full beyond a short
// bounded wait (dispatch.go) the watch ends with ErrTooSlow. A goroutine per watcher
// first sends the initial events, then forwards in.
type Watcher struct {
	prefix    string
	start     uint64 // live events with Rev <= start are covered by initial
	bookmarks bool
	snapshot  []*item     // SendInitial: the live items at start (immutable, shared with the view)
	initial   []Event     // after snapshot: its closing bookmark, or the history since FromRev (kept form)
	in        chan *Event // shared with the event's other watchers: read only
	out       chan Event
	done      chan struct{}
	v         *view
	blocked   atomic.Bool // the view waits to hand this watcher an event (deliverBlocked)

	once sync.Once
	mu   sync.Mutex
	err  error
}

// Events is closed when the watch ends; Err then tells why.
func (w *Watcher) Events() <-chan Event { return w.out }

// Done is closed as soon as the watch ends, before the events already handed over are read.
func (w *Watcher) Done() <-chan struct{} { return w.done }

// Err is nil after Stop or context cancellation, ErrTooSlow after an
// overflow, ErrClosed when the Log closed.
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Stop ends the watch.
func (w *Watcher) Stop() {
	w.v.mu.Lock()
	w.v.removeWatcher(w)
	w.v.mu.Unlock()
	w.finish(nil)
}

// finish records why the watch ended; the first reason wins.
func (w *Watcher) finish(err error) {
	w.once.Do(func() {
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
		close(w.done)
	})
}

func (w *Watcher) run(ctx context.Context) {
	defer close(w.out)
	send := func(ev Event) bool {
		select {
		case w.out <- ev:
			return true
		case <-w.done:
		case <-ctx.Done():
			w.Stop()
		}
		return false
	}
	for i, it := range w.snapshot {
		w.snapshot[i] = nil // what was sent is not kept alive by this watcher
		e := w.v.entry(it)  // unpacked here, not under the view's lock
		if !send(Event{Type: EventPut, Key: it.key, Rev: e.Rev, Value: e.Value, Header: e.Header}) {
			return
		}
	}
	w.snapshot = nil
	for i := range w.initial {
		if !send(w.v.event(&w.initial[i])) {
			return
		}
	}
	w.initial = nil
	for {
		select {
		case ev := <-w.in:
			observeLag(*ev)
			if !send(*ev) {
				return
			}
		case <-w.done:
			return
		case <-ctx.Done():
			w.Stop()
			return
		}
	}
}

// Watch streams events on keys starting with prefix (a plain string prefix).
func (l *Log) Watch(ctx context.Context, prefix string, o WatchOptions) (*Watcher, error) {
	if l.closed.Load() {
		return nil, ErrClosed
	}
	if err := l.mustHold(prefix); err != nil {
		return nil, err
	}
	// The snapshot, the history and "now" all include this Log's own writes under prefix.
	if err := l.waitOwn(ctx, prefix, false); err != nil {
		return nil, err
	}
	if o.SendInitial && o.FromRev > 0 {
		if err := l.WaitForRev(ctx, o.FromRev); err != nil {
			return nil, err
		}
	}
	v := l.view
	w := &Watcher{
		prefix:    prefix,
		bookmarks: o.Bookmarks,
		in:        make(chan *Event, l.cfg.WatchBuffer),
		out:       make(chan Event),
		done:      make(chan struct{}),
		v:         v,
	}
	v.mu.Lock()
	if o.FromRev > 0 && o.FromRev < v.oldestWatchRev() {
		v.mu.Unlock()
		return nil, ErrExpired
	}
	switch {
	case o.SendInitial:
		w.start = v.rev
		// A pointer per key, not a copy of its event: a watcher that never reads holds
		// 8 bytes per object, as kube-apiserver's watch cache intervals do.
		w.snapshot = v.itemsLocked(prefix)
		w.initial = []Event{{Type: EventBookmark, Rev: v.rev, InitialEnd: true}}
	case o.FromRev > 0:
		w.start = max(o.FromRev, v.rev)
		i := sort.Search(len(v.history), func(i int) bool { return v.history[i].Rev > o.FromRev })
		for _, ev := range v.history[i:] {
			if strings.HasPrefix(ev.Key, prefix) {
				w.initial = append(w.initial, ev)
			}
		}
	default:
		w.start = v.rev
	}
	v.addWatcher(w)
	v.mu.Unlock()
	go w.run(ctx)
	return w, nil
}
