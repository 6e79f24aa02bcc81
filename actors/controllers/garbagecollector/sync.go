package garbagecollector

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/schemas"
)

func (c *controller) sync(ctx context.Context, key string) error {
	k, ns, name, ok := c.parseKey(key)
	if !ok || c.informerOf(k) == nil {
		return nil
	}
	o, ok := c.informerOf(k).Get(ns, name)
	if !ok {
		return nil
	}
	m := controllerkit.Meta(o)
	if m.GetDeletionTimestamp() != nil {
		switch {
		case hasFinalizer(m, metav1.FinalizerOrphanDependents):
			return c.orphanDependents(ctx, o)
		case hasFinalizer(m, metav1.FinalizerDeleteDependents):
			return c.deleteDependentsFirst(ctx, o)
		}
		return nil
	}
	return c.checkOwners(ctx, k, o)
}

type ownerState int

const (
	solid   ownerState = iota // exists and is not waiting for its dependents
	absent                    // gone (or replaced by another object of the same name)
	waiting                   // being deleted in the foreground
)

// ownerOf looks an owner up: in the cache first, then, since the cache of the owner's kind may
// lag behind that of the dependent's, with a read from the apiserver before calling it absent.
func (c *controller) ownerOf(ctx context.Context, ns string, ref metav1.OwnerReference) (ownerState, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return solid, nil // an unreadable reference is never a reason to delete
	}
	k, ok := schemas.ByGVK(gv.WithKind(ref.Kind))
	if !ok {
		k, ok = c.customKind(gv.Group, ref.Kind)
	}
	if !ok {
		return solid, nil
	}
	if !k.Namespaced {
		ns = ""
	}
	state := func(o runtime.Object) ownerState {
		m := controllerkit.Meta(o)
		if m.GetUID() != ref.UID {
			return absent
		}
		if m.GetDeletionTimestamp() != nil && hasFinalizer(m, metav1.FinalizerDeleteDependents) {
			return waiting
		}
		return solid
	}
	if inf := c.informerOf(k); inf != nil {
		if o, ok := inf.Get(ns, ref.Name); ok && state(o) != absent {
			return state(o), nil
		}
	}
	o, err := c.client.Get(ctx, k, ns, ref.Name)
	if apierrors.IsNotFound(err) {
		return absent, nil
	}
	if err != nil {
		return solid, err
	}
	return state(o), nil
}

// checkOwners deletes an object all of whose owners are gone (or waiting for it), and drops
// references to missing owners from an object that still has a live one.
func (c *controller) checkOwners(ctx context.Context, k *schemas.Kind, o runtime.Object) error {
	m := controllerkit.Meta(o)
	refs := m.GetOwnerReferences()
	if len(refs) == 0 {
		return nil
	}
	var live, drop []metav1.OwnerReference
	anyWaiting := false
	for _, r := range refs {
		st, err := c.ownerOf(ctx, m.GetNamespace(), r)
		if err != nil {
			return err
		}
		switch st {
		case solid:
			live = append(live, r)
		case waiting:
			anyWaiting = true
			drop = append(drop, r)
		default:
			drop = append(drop, r)
		}
	}
	if len(drop) == 0 {
		return nil
	}
	if len(live) > 0 {
		next := o.DeepCopyObject()
		controllerkit.Meta(next).SetOwnerReferences(live)
		_, err := c.client.Update(ctx, next)
		return ignoreNotFound(err)
	}
	// Every owner is gone or going: so is this object. Its own dependents go first when an owner
	// is waiting in the foreground, so that the wait covers the whole subtree.
	policy := metav1.DeletePropagationBackground
	if anyWaiting && len(c.dependentsOf(m.GetUID())) > 0 {
		policy = metav1.DeletePropagationForeground
	}
	return c.deleteObject(ctx, k, m, policy)
}

func (c *controller) deleteObject(ctx context.Context, k *schemas.Kind, m metav1.Object, policy metav1.DeletionPropagation) error {
	uid := m.GetUID()
	opts := &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
	if !hasGCFinalizer(m) { // a propagation the object already asked for stands
		opts.PropagationPolicy = ptr.To(policy)
	}
	err := c.client.Delete(ctx, k, m.GetNamespace(), m.GetName(), opts)
	if apierrors.IsConflict(err) { // another object of that name now: not ours to delete
		return nil
	}
	return ignoreNotFound(err)
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// dependents returns the cached dependents of owner.
func (c *controller) dependentObjects(owner metav1.Object) []dependent {
	var out []dependent
	for _, key := range c.dependentsOf(owner.GetUID()) {
		k, ns, name, ok := c.parseKey(key)
		if !ok || c.informerOf(k) == nil {
			continue
		}
		if o, ok := c.informerOf(k).Get(ns, name); ok {
			out = append(out, dependent{kind: k, obj: o})
		}
	}
	return out
}

type dependent struct {
	kind *schemas.Kind
	obj  runtime.Object
}

// orphanDependents strips owner's references from its dependents, then lets owner go.
func (c *controller) orphanDependents(ctx context.Context, owner runtime.Object) error {
	om := controllerkit.Meta(owner)
	var errs []error
	for _, d := range c.dependentObjects(om) {
		m := controllerkit.Meta(d.obj)
		var keep []metav1.OwnerReference
		for _, r := range m.GetOwnerReferences() {
			if r.UID != om.GetUID() {
				keep = append(keep, r)
			}
		}
		next := d.obj.DeepCopyObject()
		controllerkit.Meta(next).SetOwnerReferences(keep)
		if _, err := c.client.Update(ctx, next); ignoreNotFound(err) != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return c.removeFinalizer(ctx, owner, metav1.FinalizerOrphanDependents)
}

// deleteDependentsFirst deletes owner's dependents and lets owner go once none that blocks
// its deletion (blockOwnerDeletion) is left.
func (c *controller) deleteDependentsFirst(ctx context.Context, owner runtime.Object) error {
	om := controllerkit.Meta(owner)
	var errs []error
	blocking := 0
	for _, d := range c.dependentObjects(om) {
		m := controllerkit.Meta(d.obj)
		if m.GetDeletionTimestamp() == nil {
			policy := metav1.DeletePropagationBackground
			if len(c.dependentsOf(m.GetUID())) > 0 {
				policy = metav1.DeletePropagationForeground
			}
			if err := c.deleteObject(ctx, d.kind, m, policy); err != nil {
				errs = append(errs, err)
			}
		}
		for _, r := range m.GetOwnerReferences() {
			if r.UID == om.GetUID() && ptr.Deref(r.BlockOwnerDeletion, false) {
				blocking++
			}
		}
	}
	if len(errs) > 0 || blocking > 0 {
		return errors.Join(errs...) // the dependents' deletes wake this owner again
	}
	return c.removeFinalizer(ctx, owner, metav1.FinalizerDeleteDependents)
}

func (c *controller) removeFinalizer(ctx context.Context, obj runtime.Object, f string) error {
	next := obj.DeepCopyObject()
	m := controllerkit.Meta(next)
	var keep []string
	for _, x := range m.GetFinalizers() {
		if x != f {
			keep = append(keep, x)
		}
	}
	m.SetFinalizers(keep)
	_, err := c.client.Update(ctx, next)
	return ignoreNotFound(err)
}
