// Package informer keeps an in-memory, always-current copy of one kind of object by watching
// the state log directly (actors read the log; only the apiserver writes it), and tells
// handlers about every change, like client-go's shared informers.
package informer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/logvalue"
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

// Source is where an informer's events come from: the state log (the default), or the API
// (APISource) for a cache that holds only what a field selector picks.
type Source interface {
	Watch(ctx context.Context, prefix string, o statelog.WatchOptions) (Stream, error)
}

// Stream is one watch of a Source (*statelog.Watcher is one).
type Stream interface {
	Events() <-chan statelog.Event
	Err() error
	Stop()
}

type logSource struct{ log *statelog.Log }

func (l logSource) Watch(ctx context.Context, prefix string, o statelog.WatchOptions) (Stream, error) {
	return l.log.Watch(ctx, prefix, o)
}

// Informer mirrors the objects of one kind (optionally one namespace).
type Informer struct {
	src       Source
	kind      *schemas.Kind
	namespace string
	transform Transform      // nil: whole objects
	admit     AdmitFunc      // nil: every object
	check     *mutationCheck // nil unless the factory checks for changed cached objects
	shared    *sharedDecoder // the factory's, for an informer over the log; nil: decodes alone
	labels    labelSets      // the cached objects' label maps, interned

	// deliver serialises changes and handler calls, so handlers see every change once, in
	// log order, and a handler added late replays the cache before the next change.
	deliver sync.Mutex

	mu       sync.RWMutex
	objects  map[string]runtime.Object  // by storage key
	traces   map[string]statelog.Header // trace context stored with each key's last write
	indexes  indexes
	rev      uint64
	synced   bool
	handlers []*registration
	syncedCh chan struct{}
	running  chan struct{} // holds a token while a watch loop runs
}

type registration struct{ h Handler }

// New creates an informer over the state log; Run starts it.
func New(log *statelog.Log, kind *schemas.Kind, namespace string) *Informer {
	return NewFrom(logSource{log}, kind, namespace)
}

// NewFrom creates an informer over src; Run starts it.
func NewFrom(src Source, kind *schemas.Kind, namespace string) *Informer {
	i := &Informer{src: src, kind: kind, namespace: namespace, objects: map[string]runtime.Object{}, traces: map[string]statelog.Header{}, syncedCh: make(chan struct{}), running: make(chan struct{}, 1)}
	i.indexes.init()
	i.AddIndexer(IndexNamespace, namespaceIndex)
	return i
}

// Kind is the kind of object this informer mirrors.
func (i *Informer) Kind() *schemas.Kind { return i.kind }

// For is New for a kind named by resource ("pods", "deployments", ...); it panics on a typo.
func For(log *statelog.Log, group, resource string) *Informer {
	return New(log, MustKind(group, resource), "")
}

// MustKind is the v1 kind of a resource ("pods", "deployments", ...); it panics on a typo.
func MustKind(group, resource string) *schemas.Kind {
	k, ok := schemas.ByResource(group, "v1", resource)
	if !ok {
		panic("informer: unknown resource " + group + "/" + resource)
	}
	return k
}

// AddHandler registers h and returns the func that removes it. A handler added to a running
// informer is first told of every cached object as an add, as client-go's shared informers do.
func (i *Informer) AddHandler(h Handler) (remove func()) {
	i.deliver.Lock()
	defer i.deliver.Unlock()
	r := &registration{h: h}
	i.mu.Lock()
	i.handlers = append(i.handlers, r)
	existing := make([]runtime.Object, 0, len(i.objects))
	for _, o := range i.objects {
		existing = append(existing, o)
	}
	i.mu.Unlock()
	for _, o := range existing {
		h.OnAdd(o)
	}
	return func() {
		i.mu.Lock()
		defer i.mu.Unlock()
		for n, x := range i.handlers {
			if x == r {
				i.handlers = append(i.handlers[:n:n], i.handlers[n+1:]...)
				return
			}
		}
	}
}

// Run watches until ctx ends. A watch that ends (slow consumer, compaction) is resumed from the
// last revision seen or, if that revision is gone, replaced by a fresh snapshot that is diffed
// against the cache so handlers still see every net change.
//
// Shared informers may be handed to several runners (the factory's actor, a component that
// was given it): one watch loop runs at a time, the others wait to take over.
func (i *Informer) Run(ctx context.Context) error {
	select {
	case i.running <- struct{}{}:
		defer func() { <-i.running }()
	case <-ctx.Done():
		return nil
	}
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
	w, err := i.src.Watch(ctx, schemas.StoragePrefix(i.kind, i.namespace), opts)
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
	i.deliver.Lock()
	defer i.deliver.Unlock()
	i.mu.Lock()
	var gone []runtime.Object
	if seen != nil {
		for key, obj := range i.objects {
			if !seen[key] {
				gone = append(gone, obj)
				delete(i.objects, key)
				i.indexes.update(key, obj, nil)
				i.checkReplace(key, obj, nil)
			}
		}
	}
	i.rev = max(i.rev, rev)
	first := !i.synced
	i.synced = true
	handlers := i.handlers
	i.mu.Unlock()
	for _, obj := range gone {
		for _, r := range handlers {
			r.h.OnDelete(obj)
		}
	}
	if first {
		close(i.syncedCh)
	}
}

// decode is the object the cache keeps of a value stored at rev.
func (i *Informer) decode(value []byte, rev uint64) (runtime.Object, error) {
	if d := i.shared.get(); d != nil {
		shared, err := d.DecodeShared(i.kind, value, rev)
		if err != nil {
			return nil, fmt.Errorf("informer %s: %w", i.kind.Resource, err)
		}
		// The top level is the cache's own, so no reader of the cache sees or changes the
		// shared object's metadata; managedFields stay out, as below.
		return i.trim(withoutManagedFields(shared)), nil
	}
	obj, err := logvalue.Decode(i.kind, value, rev)
	if err != nil {
		return nil, fmt.Errorf("informer %s: %w", i.kind.Resource, err)
	}
	if m, err := meta.Accessor(obj); err == nil {
		// No reader of a cache needs them (controllers write back without them, which the
		// apiserver takes as unchanged, as kube-apiserver does), as client-go's
		// TransformStripManagedFields has it; they were a third of a cached Service or slice.
		m.SetManagedFields(nil)
	}
	return i.trim(obj), nil
}

// trim is what the cache keeps of obj (see Factory.Keep), with its labels interned. obj's top
// level is the cache's own.
func (i *Informer) trim(obj runtime.Object) runtime.Object {
	if i.transform != nil {
		obj = i.transform(obj)
	}
	i.labels.intern(obj)
	return obj
}

func (i *Informer) apply(ev statelog.Event) {
	if ev.Type != statelog.EventDelete && i.admit != nil && !i.admit(ev.Value) {
		ev.Type = statelog.EventDelete // out of this cache: gone for its readers, if it was in
	}
	var obj runtime.Object
	if ev.Type != statelog.EventDelete { // a delete hands the readers the cached object
		var err error
		if obj, err = i.decode(ev.Value, ev.Rev); err != nil {
			return
		}
	}
	i.deliver.Lock()
	defer i.deliver.Unlock()
	i.mu.Lock()
	old, had := i.objects[ev.Key]
	if ev.Type == statelog.EventDelete {
		delete(i.objects, ev.Key)
		delete(i.traces, ev.Key)
		i.indexes.update(ev.Key, old, nil)
		i.checkReplace(ev.Key, old, nil)
	} else {
		i.objects[ev.Key] = obj
		i.indexes.update(ev.Key, old, obj)
		i.checkReplace(ev.Key, old, obj)
		if ev.Header.Get("traceparent") != "" {
			i.traces[ev.Key] = ev.Header
		} else {
			delete(i.traces, ev.Key)
		}
	}
	i.rev = max(i.rev, ev.Rev)
	handlers := i.handlers
	i.mu.Unlock()
	i.countEvent(ev)
	for _, r := range handlers {
		switch {
		case ev.Type == statelog.EventDelete:
			if had {
				r.h.OnDelete(old)
			}
		case had:
			r.h.OnUpdate(old, obj)
		default:
			r.h.OnAdd(obj)
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
	return otel.GetTextMapPropagator().Extract(ctx, headerCarrier(h))
}

// headerCarrier reads a stored trace context for a propagator's Extract.
type headerCarrier statelog.Header

var _ propagation.TextMapCarrier = headerCarrier(nil)

func (c headerCarrier) Get(key string) string { return statelog.Header(c).Get(key) }
func (c headerCarrier) Keys() []string        { return statelog.Header(c).Names() }

// Set is never called by Extract; a stored header is not changed.
func (headerCarrier) Set(string, string) {}

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

// List returns the cached objects kept by keep (nil = all), in no particular order. It walks
// the whole cache: per-event paths use ByIndex instead.
func (i *Informer) List(keep func(runtime.Object) bool) []runtime.Object {
	i.mu.RLock()
	defer i.mu.RUnlock()
	out := make([]runtime.Object, 0, len(i.objects))
	for _, o := range i.objects {
		if keep == nil || keep(o) {
			out = append(out, o)
		}
	}
	return out
}

// Len is the number of cached objects.
func (i *Informer) Len() int {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return len(i.objects)
}
