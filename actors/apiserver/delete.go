package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

// Finalizers the garbage collector acts on, as in Kubernetes.
const (
	FinalizerOrphan     = metav1.FinalizerOrphanDependents
	FinalizerForeground = metav1.FinalizerDeleteDependents
)

func decodeDeleteOptions(body []byte, info *requestInfo) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	if len(body) > 0 {
		if err := json.Unmarshal(body, opts); err != nil {
			return nil, badRequest("DeleteOptions: %v", err)
		}
	}
	if info != nil {
		if g := info.query.Get("gracePeriodSeconds"); g != "" {
			v, err := parseRV(g)
			if err != nil {
				return nil, badRequest("gracePeriodSeconds: %q is not a whole number", g)
			}
			opts.GracePeriodSeconds = ptr.To(int64(v))
		}
		if p := info.query.Get("propagationPolicy"); p != "" {
			pp := metav1.DeletionPropagation(p)
			opts.PropagationPolicy = &pp
		}
	}
	if opts.PropagationPolicy != nil {
		switch *opts.PropagationPolicy {
		case metav1.DeletePropagationOrphan, metav1.DeletePropagationBackground, metav1.DeletePropagationForeground:
		default:
			return nil, badRequest("propagationPolicy: Unsupported value: %q: supported values: \"Orphan\", \"Background\", \"Foreground\"", *opts.PropagationPolicy)
		}
	}
	return opts, nil
}

// delete starts or finishes the deletion of one object, as Kubernetes does: objects with
// finalizers, and pods running on a node, first get a deletionTimestamp; the rest go at once.
func (s *Server) delete(ctx context.Context, k *schemas.Kind, info requestInfo, body []byte, wo writeOptions) (runtime.Object, error) {
	opts, err := decodeDeleteOptions(body, &info)
	if err != nil {
		return nil, err
	}
	return s.deleteWith(ctx, k, info.namespace, info.name, opts, wo)
}

func (s *Server) deleteWith(ctx context.Context, k *schemas.Kind, ns, name string, opts *metav1.DeleteOptions, wo writeOptions) (runtime.Object, error) {
	if len(opts.DryRun) > 0 && opts.DryRun[0] == "All" {
		wo.dryRun = true
	}
	ctx = statelog.Freeing(ctx) // its writes must fit on a disk too full for growing ones
	for attempt := 0; ; attempt++ {
		cur, curRev, err := s.getWithRev(ctx, k, ns, name)
		if err != nil {
			return nil, err
		}
		m := mustMeta(cur)
		if p := opts.Preconditions; p != nil {
			if p.UID != nil && *p.UID != m.GetUID() {
				return nil, apierrors.NewConflict(groupResource(k), name, errors.New("Precondition failed: UID in precondition: "+string(*p.UID)+", UID in object meta: "+string(m.GetUID())))
			}
			if p.ResourceVersion != nil && *p.ResourceVersion != formatRev(curRev) {
				return nil, apierrors.NewConflict(groupResource(k), name, errors.New("Precondition failed: ResourceVersion in precondition: "+*p.ResourceVersion+", ResourceVersion in object meta: "+formatRev(curRev)))
			}
		}
		if err := s.admit(ctx, &Attributes{Verb: "delete", Kind: k, Namespace: ns, Name: name, OldObject: cur}); err != nil {
			return nil, err
		}
		if k.GVK.Kind == "Namespace" {
			return s.deleteNamespace(ctx, k, cur, curRev, wo)
		}
		next := cur.DeepCopyObject()
		nm := mustMeta(next)
		graceful := s.markForDeletion(k, next, opts)
		if !graceful && len(nm.GetFinalizers()) == 0 {
			obj, err := s.deleteNow(ctx, k, cur, curRev, wo)
			if apierrors.IsConflict(err) && attempt < maxConflictRetries {
				continue
			}
			return obj, err
		}
		if !changed(cur, next) || wo.dryRun {
			return next, nil
		}
		data, err := encodeForStorage(next)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		rev, err := s.log.Update(ctx, schemas.StorageKey(k, ns, name), data, curRev, traceHeader(ctx))
		if errors.Is(err, statelog.ErrConflict) && attempt < maxConflictRetries {
			continue
		}
		if err != nil {
			return nil, writeFailed(err)
		}
		nm.SetResourceVersion(formatRev(rev))
		return next, nil
	}
}

// markForDeletion sets deletionTimestamp and the propagation finalizer on obj when the delete
// must wait (finalizers, or a pod that its kubelet has to stop); it reports a graceful pod delete.
func (s *Server) markForDeletion(k *schemas.Kind, obj runtime.Object, opts *metav1.DeleteOptions) bool {
	m := mustMeta(obj)
	if opts.PropagationPolicy != nil && m.GetDeletionTimestamp() == nil {
		switch *opts.PropagationPolicy {
		case metav1.DeletePropagationOrphan:
			m.SetFinalizers(appendUnique(m.GetFinalizers(), FinalizerOrphan))
		case metav1.DeletePropagationForeground:
			m.SetFinalizers(appendUnique(m.GetFinalizers(), FinalizerForeground))
		}
	}
	grace, graceful := podGrace(obj, opts)
	if m.GetDeletionTimestamp() != nil {
		// A shorter grace period may still be asked for (kubectl delete --grace-period=0 --force).
		if graceful && m.GetDeletionGracePeriodSeconds() != nil && grace < *m.GetDeletionGracePeriodSeconds() {
			m.SetDeletionGracePeriodSeconds(ptr.To(grace))
		}
		return graceful && grace > 0
	}
	if !graceful && len(m.GetFinalizers()) == 0 {
		return false
	}
	if graceful {
		ts := metav1.NewTime(s.now().Add(time.Duration(grace) * time.Second).UTC().Truncate(time.Second))
		m.SetDeletionTimestamp(&ts)
		m.SetDeletionGracePeriodSeconds(ptr.To(grace))
		return true
	}
	ts := metav1.NewTime(s.now().UTC().Truncate(time.Second))
	m.SetDeletionTimestamp(&ts)
	m.SetDeletionGracePeriodSeconds(ptr.To(int64(0)))
	return false
}

// podGrace: a pod bound to a node and not yet finished is stopped by its kubelet, which then
// deletes it with grace 0; an unbound or finished pod needs no grace.
func podGrace(obj runtime.Object, opts *metav1.DeleteOptions) (int64, bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return 0, false
	}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	if opts.GracePeriodSeconds != nil {
		grace = *opts.GracePeriodSeconds
	}
	if grace <= 0 {
		return 0, false
	}
	return grace, true
}

func appendUnique(list []string, v string) []string {
	for _, x := range list {
		if x == v {
			return list
		}
	}
	return append(list, v)
}

// deleteNow writes the tombstone and releases what the object held.
func (s *Server) deleteNow(ctx context.Context, k *schemas.Kind, cur runtime.Object, curRev uint64, wo writeOptions) (runtime.Object, error) {
	m := mustMeta(cur)
	if wo.dryRun {
		return cur, nil
	}
	rev, err := s.log.Delete(ctx, schemas.StorageKey(k, m.GetNamespace(), m.GetName()), curRev, traceHeader(ctx))
	if errors.Is(err, statelog.ErrConflict) {
		return nil, conflict(k, m.GetName())
	}
	if errors.Is(err, statelog.ErrNotFound) {
		return nil, apierrors.NewNotFound(groupResource(k), m.GetName())
	}
	if err != nil {
		return nil, writeFailed(err)
	}
	s.releaseFor(ctx, k, cur)
	m.SetResourceVersion(formatRev(rev))
	return cur, nil
}

// deleteNamespace marks the namespace Terminating, deletes everything in it, and removes the
// namespace once nothing is left (objects held by finalizers keep it Terminating until a later
// delete finds it empty).
func (s *Server) deleteNamespace(ctx context.Context, k *schemas.Kind, cur runtime.Object, curRev uint64, wo writeOptions) (runtime.Object, error) {
	ns := cur.(*corev1.Namespace).DeepCopy()
	if wo.dryRun {
		return ns, nil
	}
	if ns.DeletionTimestamp == nil {
		ts := metav1.NewTime(s.now().UTC().Truncate(time.Second))
		ns.DeletionTimestamp = &ts
		ns.Status.Phase = corev1.NamespaceTerminating
		data, err := encodeForStorage(ns)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		rev, err := s.log.Update(ctx, schemas.StorageKey(k, "", ns.Name), data, curRev, traceHeader(ctx))
		if err != nil {
			return nil, conflict(k, ns.Name)
		}
		curRev = rev
		ns.ResourceVersion = formatRev(rev)
	}
	empty := true
	for _, ck := range schemas.Kinds() {
		if !ck.Namespaced || ck.StoredAs != nil { // another version's objects: deleted through it
			continue
		}
		entries, _, err := s.log.List(ctx, schemas.StoragePrefix(ck, ns.Name), statelog.ReadOptions{Consistent: true})
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		for _, e := range entries {
			obj, err := decodeStored(ck, e.Value, e.Rev)
			if err != nil {
				continue
			}
			name := mustMeta(obj).GetName()
			_, err = s.deleteWith(ctx, ck, ns.Name, name, &metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}, writeOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				empty = false
			}
			if _, gerr := s.get(ctx, ck, ns.Name, name); gerr == nil {
				empty = false
			}
		}
	}
	if !empty {
		return ns, nil
	}
	return s.deleteNow(ctx, k, ns, curRev, wo)
}

// deleteCollection deletes every object that matches the request's selectors.
func (s *Server) deleteCollection(ctx context.Context, k *schemas.Kind, info requestInfo, body []byte, wo writeOptions) (runtime.Object, error) {
	opts, err := decodeDeleteOptions(body, &info)
	if err != nil {
		return nil, err
	}
	objs, rev, err := s.listObjects(ctx, k, info)
	if err != nil {
		return nil, err
	}
	for _, obj := range objs {
		m := mustMeta(obj)
		if _, err := s.deleteWith(ctx, k, m.GetNamespace(), m.GetName(), opts, wo); err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	return s.listResponse(k, objs, rev), nil
}
