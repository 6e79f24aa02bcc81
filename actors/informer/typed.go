package informer

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
)

// Typed is an informer seen through its Go type: the one place the cache's objects are
// asserted to T, so call sites never do it.
type Typed[T runtime.Object] struct{ inf *Informer }

// Of views inf as a cache of T; inf must mirror a kind whose objects are T.
func Of[T runtime.Object](inf *Informer) Typed[T] {
	if _, ok := inf.kind.New().(T); !ok {
		panic("informer " + inf.kind.Resource + ": objects are not of the asked type")
	}
	return Typed[T]{inf: inf}
}

// Informer is the untyped informer underneath.
func (t Typed[T]) Informer() *Informer { return t.inf }

// Get returns the cached object (shared: DeepCopy before changing it).
func (t Typed[T]) Get(namespace, name string) (T, bool) {
	o, ok := t.inf.Get(namespace, name)
	if !ok {
		var zero T
		return zero, false
	}
	return o.(T), true
}

// List returns every cached object, in no particular order (a whole-cache walk: not for
// per-event paths).
func (t Typed[T]) List() []T { return typed[T](t.inf.List(nil)) }

// ByIndex returns the objects filed under value in the named index.
func (t Typed[T]) ByIndex(index, value string) []T { return typed[T](t.inf.ByIndex(index, value)) }

// InNamespace returns the objects of one namespace.
func (t Typed[T]) InNamespace(namespace string) []T { return t.ByIndex(IndexNamespace, namespace) }

// AddIndexer adds a named index computed from T.
func (t Typed[T]) AddIndexer(name string, f func(T) []string) {
	t.inf.AddIndexer(name, func(o runtime.Object) []string { return f(o.(T)) })
}

// AddHandler registers typed funcs (nil ones are skipped) and returns their removal.
func (t Typed[T]) AddHandler(f TypedFuncs[T]) (remove func()) {
	return t.inf.AddHandler(Funcs{
		Add:    func(o runtime.Object) { f.add(o) },
		Update: func(old, o runtime.Object) { f.update(old, o) },
		Delete: func(o runtime.Object) { f.delete(o) },
	})
}

// WaitForSync blocks until the first snapshot is in, or ctx ends.
func (t Typed[T]) WaitForSync(ctx context.Context) bool { return t.inf.WaitForSync(ctx) }

// TraceContext returns ctx carrying the trace context of the object's last write.
func (t Typed[T]) TraceContext(ctx context.Context, namespace, name string) context.Context {
	return t.inf.TraceContext(ctx, namespace, name)
}

// TypedFuncs are handler funcs of one type.
type TypedFuncs[T runtime.Object] struct {
	Add    func(obj T)
	Update func(old, obj T)
	Delete func(obj T)
}

// Handler adapts the funcs to a Handler (for Subscriptions.Add).
func (f TypedFuncs[T]) Handler() Handler {
	return Funcs{Add: f.add, Update: f.update, Delete: f.delete}
}

func (f TypedFuncs[T]) add(o runtime.Object) {
	if f.Add != nil {
		f.Add(o.(T))
	}
}

func (f TypedFuncs[T]) update(old, o runtime.Object) {
	if f.Update != nil {
		f.Update(old.(T), o.(T))
	}
}

func (f TypedFuncs[T]) delete(o runtime.Object) {
	if f.Delete != nil {
		f.Delete(o.(T))
	}
}

func typed[T runtime.Object](objs []runtime.Object) []T {
	out := make([]T, len(objs))
	for n, o := range objs {
		out[n] = o.(T)
	}
	return out
}
