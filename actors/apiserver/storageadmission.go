package apiserver

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/schemas/defaults"
)

// admitDefaultStorageClass is kube's DefaultStorageClass admission: a claim created without
// spec.storageClassName gets the default class (the newest, if several are marked); "" asks
// for no class and is left alone. Every new claim also gets the pvc-protection finalizer, as
// kube's StorageObjectInUseProtection admission adds it.
func (s *Server) admitDefaultStorageClass(ctx context.Context, a *Attributes) error {
	if a.Verb != "create" || a.Subresource != "" || a.Kind.GVK.Group != "" || a.Kind.GVK.Kind != "PersistentVolumeClaim" {
		return nil
	}
	pvc := a.Object.(*corev1.PersistentVolumeClaim)
	// kube's StorageObjectInUseProtection: the claim stays while a pod uses it.
	if !slices.Contains(pvc.Finalizers, defaults.PVCProtectionFinalizer) {
		pvc.Finalizers = append(pvc.Finalizers, defaults.PVCProtectionFinalizer)
	}
	if pvc.Spec.StorageClassName != nil {
		return nil
	}
	k, _ := schemas.ByResource(storagev1.GroupName, "v1", "storageclasses")
	objs, _, err := s.listObjects(ctx, k, requestInfo{})
	if err != nil {
		return err
	}
	var def *storagev1.StorageClass
	for _, o := range objs {
		c := o.(*storagev1.StorageClass)
		if defaults.IsDefaultClass(c) && (def == nil || def.CreationTimestamp.Before(&c.CreationTimestamp) ||
			(def.CreationTimestamp.Equal(&c.CreationTimestamp) && c.Name < def.Name)) {
			def = c
		}
	}
	if def != nil {
		name := def.Name
		pvc.Spec.StorageClassName = &name
	}
	return nil
}

// EnsureDefaultStorageClass creates the built-in default class (local-path) when it is
// missing; an existing one is left as an administrator may have annotated it.
func (s *Server) EnsureDefaultStorageClass(ctx context.Context) error {
	k, _ := schemas.ByResource(storagev1.GroupName, "v1", "storageclasses")
	_, err := s.createObject(ctx, k, "", defaults.LocalPathStorageClass(), writeOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
