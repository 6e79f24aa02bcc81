// Package informer keeps an in-memory, always-current copy of one kind of object by watching
// the state log directly (actors read the log; only the apiserver writes it), and tells
// handlers about every change, like client-go's shared informers.
package informer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

// Handler is told about changes. Calls for one informer are serial, in log order.
type Handler interface {
	OnAdd(obj runtime.Object)
	OnUpdate(old, obj runtime.Object)
	OnDelete(obj runtime.Object)
}

// Funcs adapts functions to Handler; nil funcs are skipped.
type Funcs struct {
	Add    func(obj runtime.Object)
	Update func(old, obj runtime.Object)
	Delete func(obj runtime.Object)
}

func (f Funcs) OnAdd(o runtime.Object) {
	if f.Add != nil {
		f.Add(o)
	}
}
func (f Funcs) OnUpdate(old, o runtime.Object) {
	if f.Update != nil {
		f.Update(old, o)
	}
}
func (f Funcs) OnDelete(o runtime.Object) {
	if f.Delete != nil {
		f.Delete(o)
	}
}

// Informer mirrors the objects of one kind (optionally one namespace).
type Informer struct {
	log       *statelog.Log
	kind      *schemas.Kind
	namespace string

	mu       sync.RWMutex
	objects  map[string]runtime.Object  // by storage key
	traces   map[string]statelog.Header // trace context stored with each key's last write
	rev      uint64
	synced   bool
	handlers []Handler
	syncedCh chan struct{}
}

// New creates an informer; Run starts it.
func New(log *statelog.Log, kind *schemas.Kind, namespace string) *Informer {
	return &Informer{log: log, kind: kind, namespace: namespace, objects: map[string]runtime.Object{}, traces: map[string]statelog.Header{}, syncedCh: make(chan struct{})}
}

// For is New for a kind named by resource ("pods", "deployments", ...); it panics on a typo.
func For(log *statelog.Log, group, resource string) *Informer {
	k, ok := schemas.ByResource(group, "v1", resource)
	if !ok {
		panic("informer: unknown resource " + group + "/" + resource)
	}
	return New(log, k, "")
}

// AddHandler registers h; add handlers before Run.
func (i *Informer) AddHandler(h Handler) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.handlers = append(i.handlers, h)
}

// Run watches until ctx ends. A watch that ends (slow consumer, compaction) is resumed from the
// last revision seen or, if that revision is gone, replaced by a fresh snapshot that is diffed
// against the cache so handlers still see every net change.
func (i *Informer) Run(ctx context.Context) error {
	backoff := 10 * time.Millisecond
	for ctx.Err() == nil {
		err := i.watchOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && !errors.Is(err, statelog.ErrExpired) && !errors.Is(err, statelog.ErrTooSlow) {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		backoff = 10 * time.Millisecond
	}
	return nil
}

func (i *Informer) watchOnce(ctx context.Context) error {
	i.mu.RLock()
	from, synced := i.rev, i.synced
	i.mu.RUnlock()
	opts := statelog.WatchOptions{FromRev: from, Bookmarks: true}
	relist := !synced || from == 0
	if relist {
		opts = statelog.WatchOptions{SendInitial: true, Bookmarks: true}
	}
	w, err := i.log.Watch(ctx, schemas.StoragePrefix(i.kind, i.namespace), opts)
	if errors.Is(err, statelog.ErrExpired) {
		relists.WithLabelValues(i.kind.Resource).Inc()
		i.mu.Lock()
		i.rev = 0 // the next round takes a fresh snapshot
		i.mu.Unlock()
		return err
	}
	if err != nil {
		return err
	}
	defer w.Stop()
	seen := map[string]bool{} // keys present in a fresh snapshot
	for ev := range w.Events() {
		switch {
		case ev.Type == statelog.EventBookmark && ev.InitialEnd:
			i.endSnapshot(seen, ev.Rev)
			seen = nil
		case ev.Type == statelog.EventBookmark:
			i.mu.Lock()
			i.rev = max(i.rev, ev.Rev)
			i.mu.Unlock()
		default:
			if seen != nil && relist {
				seen[ev.Key] = true
			}
			i.apply(ev)
		}
	}
	return w.Err()
}

// endSnapshot drops objects that a fresh snapshot no longer has, and marks the cache synced.
func (i *Informer) endSnapshot(seen map[string]bool, rev uint64) {
	i.mu.Lock()
	var gone []runtime.Object
	if seen != nil {
		for key, obj := range i.objects {
			if !seen[key] {
				gone = append(gone, obj)
				delete(i.objects, key)
			}
		}
	}
	i.rev = max(i.rev, rev)
	first := !i.synced
	i.synced = true
	handlers := i.handlers
	i.mu.Unlock()
	for _, obj := range gone {
		for _, h := range handlers {
			h.OnDelete(obj)
		}
	}
	if first {
		close(i.syncedCh)
	}
}

func (i *Informer) decode(value []byte, rev uint64) (runtime.Object, error) {
	obj := i.kind.New()
	if err := json.Unmarshal(value, obj); err != nil {
		return nil, fmt.Errorf("informer %s: %w", i.kind.Resource, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(i.kind.GVK)
	if m, err := meta.Accessor(obj); err == nil {
		m.SetResourceVersion(fmt.Sprint(rev))
	}
	return obj, nil
}

func (i *Informer) apply(ev statelog.Event) {
	obj, err := i.decode(ev.Value, ev.Rev)
	if err != nil {
		return
	}
	i.mu.Lock()
	old, had := i.objects[ev.Key]
	if ev.Type == statelog.EventDelete {
		delete(i.objects, ev.Key)
		delete(i.traces, ev.Key)
	} else {
		i.objects[ev.Key] = obj
		if ev.Header["traceparent"] != "" {
			i.traces[ev.Key] = ev.Header
		} else {
			delete(i.traces, ev.Key)
		}
	}
	i.rev = max(i.rev, ev.Rev)
	handlers := i.handlers
	i.mu.Unlock()
	i.countEvent(ev)
	for _, h := range handlers {
		switch {
		case ev.Type == statelog.EventDelete:
			if had {
				h.OnDelete(old)
			}
		case had:
			h.OnUpdate(old, obj)
		default:
			h.OnAdd(obj)
		}
	}
}

// TraceContext returns ctx carrying the trace context stored with the object's last write, so
// the work that write causes continues the trace of the request that made it.
func (i *Informer) TraceContext(ctx context.Context, namespace, name string) context.Context {
	i.mu.RLock()
	h := i.traces[schemas.StorageKey(i.kind, namespace, name)]
	i.mu.RUnlock()
	if len(h) == 0 {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, propagation.MapCarrier(h))
}

// WaitForSync blocks until the first snapshot is in, or ctx ends.
func (i *Informer) WaitForSync(ctx context.Context) bool {
	select {
	case <-i.syncedCh:
		return true
	case <-ctx.Done():
		return false
	}
}

// HasSynced reports whether the first snapshot is in.
func (i *Informer) HasSynced() bool {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.synced
}

// Rev is the revision the cache reflects.
func (i *Informer) Rev() uint64 {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.rev
}

// Get returns the cached object (shared: do not modify it; DeepCopy first).
func (i *Informer) Get(namespace, name string) (runtime.Object, bool) {
	i.mu.RLock()
	defer i.mu.RUnlock()
	obj, ok := i.objects[schemas.StorageKey(i.kind, namespace, name)]
	return obj, ok
}

// List returns the cached objects sorted by key, filtered by keep (nil = all).
func (i *Informer) List(keep func(runtime.Object) bool) []runtime.Object {
	i.mu.RLock()
	keys := make([]string, 0, len(i.objects))
	for k := range i.objects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]runtime.Object, 0, len(keys))
	for _, k := range keys {
		if o := i.objects[k]; keep == nil || keep(o) {
			out = append(out, o)
		}
	}
	i.mu.RUnlock()
	return out
}
