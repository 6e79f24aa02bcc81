// Package garbagecollector deletes objects whose owners are gone, following ownerReferences:
// background (dependents go after the owner), foreground (an owner with the foregroundDeletion
// finalizer waits until its blocking dependents are gone) and orphan (the orphan finalizer:
// dependents lose their reference to the owner instead).
package garbagecollector

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/apiserver/crd"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/schemas"
)

// Name is the controller's name in logs.
const Name = "garbage-collector"

// Config configures the collector.
type Config struct {
	Informers *informer.Factory // the process's shared informers
	Client    *apiclient.Client
	Workers   int
	// ResyncEvery re-examines every object with owners (default 1 min): a safety net only.
	ResyncEvery time.Duration
	Logger      *slog.Logger
}

type controller struct {
	client   *apiclient.Client
	factory  *informer.Factory
	ctl      *controllerkit.Controller
	queue    *controllerkit.Queue
	infMu    sync.RWMutex
	infs     map[schema.GroupResource]*informer.Informer // every watched kind's
	kindsOf  map[schema.GroupResource]*schemas.Kind
	watching map[schema.GroupResource]bool

	mu         sync.Mutex
	dependents map[types.UID]map[string]bool // owner UID -> storage keys of its dependents
	byUID      map[types.UID]string          // UID -> storage key of every cached object
}

// New returns the producer of the garbage collector actor. It watches every served kind but
// Events, and the kinds of CustomResourceDefinitions as they appear.
func New(cfg Config) func() actorkit.Actor {
	if cfg.ResyncEvery <= 0 {
		cfg.ResyncEvery = time.Minute
	}
	c := &controller{client: cfg.Client, factory: cfg.Informers, queue: &controllerkit.Queue{},
		infs: map[schema.GroupResource]*informer.Informer{}, kindsOf: map[schema.GroupResource]*schemas.Kind{},
		watching:   map[schema.GroupResource]bool{},
		dependents: map[types.UID]map[string]bool{}, byUID: map[types.UID]string{}}
	var watches []controllerkit.Watch
	for _, k := range schemas.Kinds() {
		// A version stored as another (autoscaling/v1 HPAs) has that one's objects: watched once.
		if (k.GVK.Group == "" && k.GVK.Kind == "Event") || k.Custom != nil || k.StoredAs != nil {
			continue
		}
		watches = append(watches, c.watch(k))
	}
	watches = append(watches, controllerkit.Watch{Informer: cfg.Informers.For(apiextensionsv1.GroupName, "customresourcedefinitions"),
		Handler: informer.Funcs{
			Add:    func(o runtime.Object) { c.crdSeen(o) },
			Update: func(_, o runtime.Object) { c.crdSeen(o) },
		}})
	c.ctl = &controllerkit.Controller{
		Name:        Name,
		Workers:     cfg.Workers,
		Watches:     watches,
		Queue:       c.queue,
		Reconcile:   c.sync,
		Resync:      c.resync,
		ResyncEvery: cfg.ResyncEvery,
		TraceParent: c.traceParent,
		Logger:      cfg.Logger,
	}
	return c.ctl.Producer()
}

// traceParent: a key's check continues the trace of its object's last write (a new pod's
// check is part of the rollout that made it), instead of starting a trace of its own.
func (c *controller) traceParent(ctx context.Context, key string) context.Context {
	k, ns, name, ok := c.parseKey(key)
	if !ok {
		return ctx
	}
	if inf := c.informerOf(k); inf != nil {
		return inf.TraceContext(ctx, ns, name)
	}
	return ctx
}

// watch files k's informer and returns the watch that feeds the graph from it.
func (c *controller) watch(k *schemas.Kind) controllerkit.Watch {
	inf := c.factory.ForKind(k, "")
	gr := k.GroupVersionResource().GroupResource()
	c.infMu.Lock()
	c.infs[gr], c.kindsOf[gr], c.watching[gr] = inf, k, true
	c.infMu.Unlock()
	return controllerkit.Watch{Informer: inf, Handler: informer.Funcs{
		Add:    func(o runtime.Object) { c.changed(k, nil, o) },
		Update: func(old, o runtime.Object) { c.changed(k, old, o) },
		Delete: func(o runtime.Object) { c.deleted(k, o) },
	}}
}

// crdSeen starts watching the kind a CustomResourceDefinition defines, once per resource
// (its versions share the stored objects).
func (c *controller) crdSeen(o runtime.Object) {
	def, ok := o.(*apiextensionsv1.CustomResourceDefinition)
	if !ok {
		return
	}
	c.infMu.RLock()
	seen := c.watching[schema.GroupResource{Group: def.Spec.Group, Resource: def.Spec.Names.Plural}]
	c.infMu.RUnlock()
	if seen {
		return
	}
	ks, err := crd.KindsFor(def)
	if err != nil || len(ks) == 0 {
		return
	}
	c.ctl.AddWatch(c.watch(ks[0]))
}

// customKind finds a watched custom kind by group and Kind, for a process whose lookups do
// not serve CRDs (no apiserver in it): a reference's version may be any served one.
func (c *controller) customKind(group, kind string) (*schemas.Kind, bool) {
	c.infMu.RLock()
	defer c.infMu.RUnlock()
	for gr, k := range c.kindsOf {
		if gr.Group == group && k.Custom != nil && k.GVK.Kind == kind {
			return k, true
		}
	}
	return nil, false
}

// informerOf is the informer of k's resource, nil when it is not watched.
func (c *controller) informerOf(k *schemas.Kind) *informer.Informer {
	c.infMu.RLock()
	defer c.infMu.RUnlock()
	return c.infs[k.GroupVersionResource().GroupResource()]
}

func keyOf(k *schemas.Kind, m metav1.Object) string {
	return schemas.StorageKey(k, m.GetNamespace(), m.GetName())
}

// parseKey undoes schemas.StorageKey ("<group or core>/<resource>/<namespace or _>/<name>").
func (c *controller) parseKey(key string) (*schemas.Kind, string, string, bool) {
	c.infMu.RLock()
	defer c.infMu.RUnlock()
	parts := strings.SplitN(key, "/", 4)
	if len(parts) != 4 {
		return nil, "", "", false
	}
	group := parts[0]
	if group == "core" {
		group = ""
	}
	k, ok := c.kindsOf[schema.GroupResource{Group: group, Resource: parts[1]}]
	if !ok {
		return nil, "", "", false
	}
	ns := parts[2]
	if !k.Namespaced {
		ns = ""
	}
	return k, ns, parts[3], true
}

func interesting(m metav1.Object) bool {
	return len(m.GetOwnerReferences()) > 0 || (m.GetDeletionTimestamp() != nil && hasGCFinalizer(m))
}

func hasFinalizer(m metav1.Object, f string) bool {
	for _, x := range m.GetFinalizers() {
		if x == f {
			return true
		}
	}
	return false
}

func hasGCFinalizer(m metav1.Object) bool {
	return hasFinalizer(m, metav1.FinalizerOrphanDependents) || hasFinalizer(m, metav1.FinalizerDeleteDependents)
}

func (c *controller) changed(k *schemas.Kind, old, o runtime.Object) {
	m := controllerkit.Meta(o)
	if old != nil && !graphChanged(controllerkit.Meta(old), m) {
		return // a status or spec write: nothing the collector decides on moved
	}
	key := keyOf(k, m)
	c.mu.Lock()
	c.byUID[m.GetUID()] = key
	if old != nil {
		for _, r := range controllerkit.Meta(old).GetOwnerReferences() {
			c.unlink(r.UID, key)
		}
	}
	for _, r := range m.GetOwnerReferences() {
		c.link(r.UID, key)
	}
	c.mu.Unlock()
	if interesting(m) {
		c.queue.Add(key)
	}
	if old != nil {
		// An owner waiting in foreground deletion cares when a dependent lets go of it.
		for _, r := range controllerkit.Meta(old).GetOwnerReferences() {
			if !hasRef(m, r.UID) {
				c.enqueueUID(r.UID)
			}
		}
	}
}

func (c *controller) deleted(k *schemas.Kind, o runtime.Object) {
	m := controllerkit.Meta(o)
	key := keyOf(k, m)
	c.mu.Lock()
	delete(c.byUID, m.GetUID())
	for _, r := range m.GetOwnerReferences() {
		c.unlink(r.UID, key)
	}
	deps := c.dependentsLocked(m.GetUID())
	c.mu.Unlock()
	for _, d := range deps { // their owner is gone
		c.queue.Add(d)
	}
	for _, r := range m.GetOwnerReferences() { // an owner may have been waiting for this one
		c.enqueueUID(r.UID)
	}
}

// graphChanged reports whether an update touched what the collector reads: owner references,
// deletion, finalizers. It runs for every update of every kind (500 Lease renewals a second at
// 5,000 nodes), so references are compared field by field, not by reflection.
func graphChanged(old, cur metav1.Object) bool {
	return !slices.EqualFunc(old.GetOwnerReferences(), cur.GetOwnerReferences(), sameRef) ||
		!old.GetDeletionTimestamp().Equal(cur.GetDeletionTimestamp()) ||
		!slices.Equal(old.GetFinalizers(), cur.GetFinalizers())
}

func sameRef(a, b metav1.OwnerReference) bool {
	return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Name == b.Name && a.UID == b.UID &&
		ptr.Equal(a.Controller, b.Controller) && ptr.Equal(a.BlockOwnerDeletion, b.BlockOwnerDeletion)
}

func hasRef(m metav1.Object, uid types.UID) bool {
	for _, r := range m.GetOwnerReferences() {
		if r.UID == uid {
			return true
		}
	}
	return false
}

func (c *controller) link(owner types.UID, dep string) {
	s := c.dependents[owner]
	if s == nil {
		s = map[string]bool{}
		c.dependents[owner] = s
	}
	s[dep] = true
}

func (c *controller) unlink(owner types.UID, dep string) {
	if s := c.dependents[owner]; s != nil {
		delete(s, dep)
		if len(s) == 0 {
			delete(c.dependents, owner)
		}
	}
}

func (c *controller) dependentsLocked(owner types.UID) []string {
	out := make([]string, 0, len(c.dependents[owner]))
	for d := range c.dependents[owner] {
		out = append(out, d)
	}
	return out
}

func (c *controller) dependentsOf(owner types.UID) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dependentsLocked(owner)
}

// enqueueUID wakes an owner known only by UID, if the cache has it.
func (c *controller) enqueueUID(uid types.UID) {
	c.mu.Lock()
	key, ok := c.byUID[uid]
	c.mu.Unlock()
	if ok {
		c.queue.Add(key)
	}
}

func (c *controller) resync() {
	c.infMu.RLock()
	infs := make(map[*schemas.Kind]*informer.Informer, len(c.infs))
	for gr, inf := range c.infs {
		infs[c.kindsOf[gr]] = inf
	}
	c.infMu.RUnlock()
	for k, inf := range infs {
		for _, o := range inf.List(func(o runtime.Object) bool { return interesting(controllerkit.Meta(o)) }) {
			c.queue.Add(keyOf(k, controllerkit.Meta(o)))
		}
	}
}
