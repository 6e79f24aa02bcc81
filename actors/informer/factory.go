package informer

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

// Factory holds one process's shared informers: one cache per kind (and namespace), however
// many components read it. Its actor (Actor) runs every informer as one of its goroutines.
type Factory struct {
	log *statelog.Log

	mu    sync.Mutex
	infs  map[string]*Informer
	start func(*Informer)                                              // set while the factory's actor runs: starts an informer asked for later
	via   map[string]func(kind *schemas.Kind, namespace string) Source // kinds not read from the log
	trim  map[string]Transform                                         // kinds cached in part
	admit map[string]AdmitFunc                                         // kinds cached in subset

	checks bool          // see CheckMutations
	shared sharedDecoder // see ShareDecodes
}

// Transform turns a decoded object into what the cache keeps of it, as client-go's
// SetTransform does: a process whose only reader needs a few fields keeps only those, in a
// type of the reader's own if it likes (then only GetNamespace is asked of it, for the
// namespace index; reading them through Typed panics).
type Transform func(runtime.Object) runtime.Object

// Keep makes the informers of group/resource cache what t keeps of each object, for a process
// whose every reader of that kind reads no more (skiff dns alone, not a node agent, whose proxy
// shares the informers). Call it before the first informer of that kind is asked for: a cache
// already full of whole objects would be read as trimmed, so it panics then (a code error).
func (f *Factory) Keep(group, resource string, t Transform) {
	setRule(f, &f.trim, "Keep", group, resource, t)
}

// AdmitFunc decides from an object's stored value, before any decode (logvalue's peeks read
// a field off the wire), whether a cache holds the object.
type AdmitFunc func(value []byte) bool

// Admit makes the informers of group/resource cache only the objects admit accepts, for a
// process that reads a subset the log cannot select by key (simulated kubelets: bound pods,
// the union of their kubelets' spec.nodeName field selectors): the rest is neither decoded
// nor kept. An object that stops being admitted leaves the cache (its readers see a
// delete). Call it before the first informer of that kind is asked for.
func (f *Factory) Admit(group, resource string, admit AdmitFunc) {
	setRule(f, &f.admit, "Admit", group, resource, admit)
}

// setRule sets how the informers of group/resource cache. It panics when that kind has an
// informer already: a cache filled under other rules would be read as if made under the new
// ones (a code error).
func setRule[V any](f *Factory, rules *map[string]V, what, group, resource string, v V) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, inf := range f.infs {
		if inf.kind.GVK.Group == group && inf.kind.Resource == resource {
			panic("informer: " + what + " " + resource + " after its informer was made")
		}
	}
	if *rules == nil {
		*rules = map[string]V{}
	}
	(*rules)[group+"/"+resource] = v
}

// ReadThrough makes the informers of group/resource read through src instead of the log: a
// process without the key that seals Secrets in the log reads them through the API, as
// kube's controller-manager does. Call it before the first informer of that kind is asked for.
func (f *Factory) ReadThrough(group, resource string, src func(kind *schemas.Kind, namespace string) Source) {
	setRule(f, &f.via, "ReadThrough", group, resource, src)
}

// NewFactory returns an empty factory over log.
func NewFactory(log *statelog.Log) *Factory { return &Factory{log: log, infs: map[string]*Informer{}} }

// Log is the state log the informers read.
func (f *Factory) Log() *statelog.Log { return f.log }

// ForKind returns the shared informer of kind in namespace ("" = all namespaces).
func (f *Factory) ForKind(kind *schemas.Kind, namespace string) *Informer {
	// The log holds a kind served in two versions as one of them (autoscaling/v1 HPAs are
	// stored as v2): the cache is of that one, whichever version is asked for.
	kind = schemas.Stored(kind)
	key := kind.GVK.Group + "/" + kind.Resource + "/" + namespace
	f.mu.Lock()
	defer f.mu.Unlock()
	if inf, ok := f.infs[key]; ok {
		return inf
	}
	var inf *Informer
	if src := f.via[kind.GVK.Group+"/"+kind.Resource]; src != nil {
		inf = NewFrom(src(kind, namespace), kind, namespace)
	} else {
		if !f.log.Holds(schemas.StoragePrefix(kind, namespace)) {
			// The process opened the log for other kinds: a code error, as a typo is.
			panic("informer: " + kind.Resource + " is outside the kinds this process reads from the state log")
		}
		inf = New(f.log, kind, namespace)
		inf.shared = &f.shared
	}
	inf.transform = f.trim[kind.GVK.Group+"/"+kind.Resource]
	inf.admit = f.admit[kind.GVK.Group+"/"+kind.Resource]
	if f.checks {
		inf.check = newMutationCheck()
	}
	f.infs[key] = inf
	if f.start != nil {
		f.start(inf)
	}
	return inf
}

// For returns the shared informer of a resource ("pods", "deployments", ...) in all
// namespaces; it panics on a resource that does not exist (a typo in code).
func (f *Factory) For(group, resource string) *Informer {
	return f.ForKind(MustKind(group, resource), "")
}

// Shared is For seen as T.
func Shared[T runtime.Object](f *Factory, group, resource string) Typed[T] {
	return Of[T](f.For(group, resource))
}

// Actor returns the producer of the actor that runs the factory's informers, each under its
// supervision: a failing watch loop restarts them all from their last revisions.
func (f *Factory) Actor() func() actorkit.Actor {
	return func() actorkit.Actor { return &factoryActor{f: f} }
}

type factoryActor struct{ f *Factory }

// runInformer asks the factory's actor to run an informer added after it started.
type runInformer struct{ inf *Informer }

func (a *factoryActor) Receive(ctx actorkit.Context) {
	switch m := ctx.Message().(type) {
	case *actorkit.Started:
		sys, self := ctx.ActorSystem(), ctx.Self()
		a.f.mu.Lock()
		a.f.start = func(inf *Informer) { sys.Root.Send(self, &runInformer{inf: inf}) }
		infs := make([]*Informer, 0, len(a.f.infs))
		for _, inf := range a.f.infs {
			infs = append(infs, inf)
		}
		a.f.mu.Unlock()
		for _, inf := range infs {
			a.run(ctx, inf)
		}
	case *runInformer:
		a.run(ctx, m.inf)
	case *actorkit.Stopped:
		a.f.mu.Lock()
		a.f.start = nil
		a.f.mu.Unlock()
	}
}

func (a *factoryActor) run(ctx actorkit.Context, inf *Informer) {
	actorkit.Go(ctx, "informer "+inf.kind.Resource, func(ctx context.Context) { _ = inf.Run(ctx) })
}

// EventType is what happened to an object.
type EventType int

// The changes an informer reports.
const (
	Added EventType = iota
	Updated
	Deleted
)

// Event is an informer change delivered to an actor as a message (see Subscribe): the actor's
// own mailbox orders it with the actor's other work, and a panic handling it is the actor's.
type Event struct {
	Sub      *Subscription // the subscription that sent it
	Informer *Informer
	Type     EventType
	Old, Obj runtime.Object // Old only on Updated
}

// To hands the change to h, as the informer would have called it.
func (e *Event) To(h Handler) {
	switch e.Type {
	case Added:
		h.OnAdd(e.Obj)
	case Updated:
		h.OnUpdate(e.Old, e.Obj)
	case Deleted:
		h.OnDelete(e.Obj)
	}
}

// Subscription sends an informer's changes to an actor. An actor subscribes on every start
// (the informer replays its cache as adds) and stops on stop; events of an earlier
// subscription may still sit in its mailbox after a restart, and carry that one in Sub, so the
// new incarnation can drop them.
type Subscription struct{ remove func() }

// Subscribe sends every change of inf to pid as an *Event.
func Subscribe(sys *actorkit.System, pid *actorkit.PID, inf *Informer) *Subscription {
	s := &Subscription{}
	send := func(t EventType, old, obj runtime.Object) {
		sys.Send(pid, &Event{Sub: s, Informer: inf, Type: t, Old: old, Obj: obj})
	}
	s.remove = inf.AddHandler(Funcs{
		Add:    func(o runtime.Object) { send(Added, nil, o) },
		Update: func(old, o runtime.Object) { send(Updated, old, o) },
		Delete: func(o runtime.Object) { send(Deleted, nil, o) },
	})
	return s
}

// Stop ends the subscription.
func (s *Subscription) Stop() { s.remove() }

// Subscriptions are one actor incarnation's subscriptions, each with the handler its events go
// to. The zero value is empty and ready to use.
type Subscriptions struct{ handlers map[*Subscription]Handler }

// Add subscribes pid to inf; its events are for h.
func (s *Subscriptions) Add(sys *actorkit.System, pid *actorkit.PID, inf *Informer, h Handler) {
	if s.handlers == nil {
		s.handlers = map[*Subscription]Handler{}
	}
	s.handlers[Subscribe(sys, pid, inf)] = h
}

// Handler is the handler of ev's subscription; false for an event of an earlier incarnation's
// subscription (or one already stopped), which the current replay covers.
func (s *Subscriptions) Handler(ev *Event) (Handler, bool) {
	h, ok := s.handlers[ev.Sub]
	return h, ok
}

// Stop ends every subscription.
func (s *Subscriptions) Stop() {
	for sub := range s.handlers {
		sub.Stop()
	}
	s.handlers = nil
}
