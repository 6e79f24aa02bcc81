package controllerkit

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/actors/apiclient"
)

// Claim sorts candidates into the ones owner controls, as Kubernetes' ControllerRefManager
// does: controlled objects that still match the selector are kept, controlled ones that no
// longer match are released (their controller reference removed), and matching orphans are
// adopted when adopt is true (the owner is not being deleted). A write that loses a race (409,
// 404) just leaves the object out; the next reconcile sees the new state.
func Claim(ctx context.Context, c *apiclient.Client, owner metav1.Object, ownerGVK schema.GroupVersionKind,
	sel labels.Selector, candidates Candidates, adopt bool) ([]runtime.Object, error) {
	out := make([]runtime.Object, 0, len(candidates.Controlled))
	var errs []error
	for _, obj := range candidates.Controlled {
		m := Meta(obj)
		if sel.Matches(labels.Set(m.GetLabels())) {
			out = append(out, obj)
			continue
		}
		if m.GetDeletionTimestamp() != nil || owner.GetDeletionTimestamp() != nil {
			continue
		}
		errs = append(errs, setOwnerRef(ctx, c, obj, func(refs []metav1.OwnerReference) []metav1.OwnerReference {
			var keep []metav1.OwnerReference
			for _, r := range refs {
				if r.UID != owner.GetUID() {
					keep = append(keep, r)
				}
			}
			return keep
		}))
	}
	if !adopt || owner.GetDeletionTimestamp() != nil {
		return out, errors.Join(errs...)
	}
	for _, obj := range candidates.Orphans {
		m := Meta(obj)
		if m.GetDeletionTimestamp() != nil || !sel.Matches(labels.Set(m.GetLabels())) {
			continue
		}
		next, err := adoptOne(ctx, c, obj, owner, ownerGVK)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, next)
	}
	return out, errors.Join(errs...)
}

func adoptOne(ctx context.Context, c *apiclient.Client, obj runtime.Object, owner metav1.Object, gvk schema.GroupVersionKind) (runtime.Object, error) {
	next := obj.DeepCopyObject()
	m := Meta(next)
	m.SetOwnerReferences(append(m.GetOwnerReferences(), *metav1.NewControllerRef(owner, gvk)))
	out, err := c.Update(ctx, next)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return out, err
}

func setOwnerRef(ctx context.Context, c *apiclient.Client, obj runtime.Object, edit func([]metav1.OwnerReference) []metav1.OwnerReference) error {
	next := obj.DeepCopyObject()
	m := Meta(next)
	m.SetOwnerReferences(edit(m.GetOwnerReferences()))
	_, err := c.Update(ctx, next)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
