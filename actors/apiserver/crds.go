package apiserver

import (
	"context"
	"slices"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/apiserver/crd"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

// CRDs is the server's registry of CustomResourceDefinitions (what it serves beyond the
// built-in kinds); it runs with the apiserver actor.
func (s *Server) CRDs() *crd.Registry { return s.crds }

func isCRDKind(k *schemas.Kind) bool {
	return k.GVK.Group == apiextensionsv1.GroupName && k.Resource == "customresourcedefinitions"
}

// admitCRD sets a CRD's finalizer, stored versions and conditions on every write of it
// (crd.Admit), against the other CRDs in the log.
func (s *Server) admitCRD(ctx context.Context, a *Attributes) error {
	c, ok := a.Object.(*apiextensionsv1.CustomResourceDefinition)
	if !ok {
		return nil
	}
	entries, _, err := s.log.List(ctx, schemas.StoragePrefix(a.Kind, ""), statelog.ReadOptions{})
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	others := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(entries))
	for _, e := range entries {
		o, err := decodeStored(a.Kind, e.Value, e.Rev)
		if err == nil {
			others = append(others, o.(*apiextensionsv1.CustomResourceDefinition))
		}
	}
	crd.Admit(c, others, a.Verb == "create", metav1.NewTime(s.now().UTC().Truncate(time.Second)))
	return nil
}

// cleanupCRD deletes the objects of a CRD being deleted (each as a client's delete would, so
// their own finalizers hold them); once none is left it drops the CRD's cleanup finalizer,
// which removes the CRD.
func (s *Server) cleanupCRD(ctx context.Context, c *apiextensionsv1.CustomResourceDefinition) (bool, error) {
	crdKind, _ := schemas.ByResource(apiextensionsv1.GroupName, "v1", "customresourcedefinitions")
	update := func(change func(m metav1.Object)) error {
		_, err := s.guaranteedUpdate(ctx, crdKind, "", c.Name, "", "update", writeOptions{}, edited(func(cur runtime.Object) (runtime.Object, error) {
			m := mustMeta(cur)
			m.SetResourceVersion("")
			change(m)
			return cur, nil
		}))
		return err
	}
	if !apihelpers.IsCRDConditionTrue(c, apiextensionsv1.Terminating) {
		// An unchanged write: admission (crd.Admit) adds the Terminating condition.
		if err := update(func(metav1.Object) {}); err != nil {
			return false, err
		}
	}
	kinds, err := crd.KindsFor(c)
	if err != nil {
		return false, err
	}
	if len(kinds) > 0 {
		k := kinds[0]
		entries, _, err := s.log.List(ctx, schemas.StoragePrefix(k, ""), statelog.ReadOptions{Consistent: true})
		if err != nil {
			return false, err
		}
		for _, e := range entries {
			obj, err := decodeStored(k, e.Value, e.Rev)
			if err != nil {
				return false, err
			}
			m := mustMeta(obj)
			if m.GetDeletionTimestamp() != nil {
				continue
			}
			if _, err := s.deleteWith(ctx, k, m.GetNamespace(), m.GetName(), &metav1.DeleteOptions{}, writeOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		if left, _, err := s.log.List(ctx, schemas.StoragePrefix(k, ""), statelog.ReadOptions{Consistent: true}); err != nil || len(left) > 0 {
			return false, err
		}
	}
	err = update(func(m metav1.Object) {
		m.SetFinalizers(slices.DeleteFunc(m.GetFinalizers(), func(f string) bool { return f == crd.CleanupFinalizer }))
	})
	if apierrors.IsNotFound(err) {
		err = nil
	}
	return err == nil, err
}
