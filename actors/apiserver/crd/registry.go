package crd

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/logvalue"
)

// retryEvery is how often a CRD being deleted is cleaned up again while objects remain.
const retryEvery = 250 * time.Millisecond

// CleanupFunc deletes the objects of a CRD being deleted and, once none is left, removes the
// CRD's cleanup finalizer; it reports whether it is done.
type CleanupFunc func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (bool, error)

// Registry follows the CustomResourceDefinitions in the log and publishes the kinds of the
// established ones (schemas.SetCustomKinds), so that every lookup in this process serves them
// from the moment the log's view applies the CRD.
type Registry struct {
	cleanup CleanupFunc
	logger  *slog.Logger

	mu      sync.Mutex
	rev     uint64
	crds    map[string]*apiextensionsv1.CustomResourceDefinition
	kinds   map[string][]*schemas.Kind
	changed chan struct{} // closed and replaced whenever the published kinds change
	served  func([]*apiextensionsv1.CustomResourceDefinition)
}

// OnServed has f called, under the registry's lock, with the served (Established) CRDs each
// time they change: the apiserver publishes their OpenAPI documents from it.
func (r *Registry) OnServed(f func([]*apiextensionsv1.CustomResourceDefinition)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.served = f
}

// NewRegistry returns a registry; cleanup (may be nil in processes that do not write) finishes
// the deletion of CRDs.
func NewRegistry(cleanup CleanupFunc, logger *slog.Logger) *Registry {
	if logger == nil {
		logger = slog.Default()
	}
	return &Registry{cleanup: cleanup, logger: logger, crds: map[string]*apiextensionsv1.CustomResourceDefinition{},
		kinds: map[string][]*schemas.Kind{}, changed: make(chan struct{})}
}

func crdPrefix() string {
	k, _ := schemas.ByResource(apiextensionsv1.GroupName, "v1", "customresourcedefinitions")
	return schemas.StoragePrefix(k, "")
}

// Run follows the log until ctx ends, resuming after a dropped watch and starting over from a
// snapshot when its revision is gone; it withdraws its kinds when it returns.
func (r *Registry) Run(ctx context.Context, log *statelog.Log) {
	defer schemas.SetCustomKinds(r, nil)
	for ctx.Err() == nil {
		r.mu.Lock()
		opts := statelog.WatchOptions{FromRev: r.rev}
		r.mu.Unlock()
		if opts.FromRev == 0 {
			opts = statelog.WatchOptions{SendInitial: true}
		}
		w, err := log.Watch(ctx, crdPrefix(), opts)
		if err == nil {
			err = r.follow(ctx, w)
			w.Stop()
		}
		if errors.Is(err, statelog.ErrExpired) {
			r.mu.Lock()
			r.rev, r.crds, r.kinds = 0, map[string]*apiextensionsv1.CustomResourceDefinition{}, map[string][]*schemas.Kind{}
			r.mu.Unlock()
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// follow applies the watch's events, and while a CRD is being deleted retries its cleanup.
func (r *Registry) follow(ctx context.Context, w *statelog.Watcher) error {
	tick := time.NewTicker(retryEvery)
	defer tick.Stop()
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				return w.Err()
			}
			r.apply(ev)
			r.cleanUp(ctx)
		case <-tick.C:
			r.cleanUp(ctx)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (r *Registry) apply(ev statelog.Event) {
	if ev.Type == statelog.EventBookmark {
		return
	}
	name := ev.Key[strings.LastIndexByte(ev.Key, '/')+1:]
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rev = ev.Rev
	if ev.Type == statelog.EventDelete {
		delete(r.crds, name)
		delete(r.kinds, name)
		r.publishLocked()
		return
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := logvalue.Unmarshal(ev.Value, crd); err != nil {
		r.logger.Error("stored CustomResourceDefinition is corrupt", "name", name, "err", err)
		return
	}
	r.crds[name] = crd
	delete(r.kinds, name)
	if apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
		ks, err := KindsFor(crd)
		if err != nil {
			r.logger.Error("CustomResourceDefinition not served", "name", name, "err", err)
		} else {
			r.kinds[name] = ks
		}
	}
	r.publishLocked()
}

// publishLocked hands the kinds to every lookup, in CRD name order.
func (r *Registry) publishLocked() {
	names := make([]string, 0, len(r.kinds))
	for n := range r.kinds {
		names = append(names, n)
	}
	sort.Strings(names)
	var all []*schemas.Kind
	served := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(names))
	for _, n := range names {
		all = append(all, r.kinds[n]...)
		served = append(served, r.crds[n])
	}
	schemas.SetCustomKinds(r, all)
	if r.served != nil {
		r.served(served)
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

// cleanUp runs the cleanup of every CRD being deleted that still has its finalizer.
func (r *Registry) cleanUp(ctx context.Context) {
	if r.cleanup == nil {
		return
	}
	r.mu.Lock()
	var going []*apiextensionsv1.CustomResourceDefinition
	for _, c := range r.crds {
		if c.DeletionTimestamp != nil && hasCleanupFinalizer(c) {
			going = append(going, c)
		}
	}
	r.mu.Unlock()
	for _, c := range going {
		if _, err := r.cleanup(ctx, c); err != nil && ctx.Err() == nil {
			r.logger.Warn("cleaning up CustomResourceDefinition", "name", c.Name, "err", err)
		}
	}
}

// Get returns the CRD of the given name as last seen in the log.
func (r *Registry) Get(name string) (*apiextensionsv1.CustomResourceDefinition, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.crds[name]
	return c, ok
}

// List returns every CRD last seen in the log.
func (r *Registry) List() []*apiextensionsv1.CustomResourceDefinition {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(r.crds))
	for _, c := range r.crds {
		out = append(out, c)
	}
	return out
}

// Served waits until the registry serves kind plural.group (true), or ctx ends.
func (r *Registry) Served(ctx context.Context, group, plural string) bool {
	for {
		r.mu.Lock()
		ks, ch := r.kinds[plural+"."+group], r.changed
		r.mu.Unlock()
		if len(ks) > 0 {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}
