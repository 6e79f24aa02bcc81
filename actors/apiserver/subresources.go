package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/schemas"
)

// bind assigns a pod to a node (pods/binding). It is a compare-and-swap on the pod's revision,
// so two schedulers can never bind the same pod twice.
func (s *Server) bind(ctx context.Context, k *schemas.Kind, ns, name string, body []byte, wo writeOptions) (runtime.Object, error) {
	var b corev1.Binding
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, badRequest("Binding: %v", err)
	}
	if b.Target.Name == "" {
		return nil, invalid(k, name, field.ErrorList{field.Required(field.NewPath("target", "name"), "the node to bind to")})
	}
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		return nil, invalid(k, name, field.ErrorList{field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node"})})
	}
	bound := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: 201}
	return onLatest(k, name, func(fresh bool) (runtime.Object, casOutcome, error) {
		cur, stored, err := s.readEntry(ctx, k, ns, name, statelog.ReadOptions{Consistent: fresh})
		if err != nil {
			return nil, casDecided, err
		}
		rev := stored.Rev
		// cur is the shared decode: the bind changes its spec's node name and its conditions,
		// so a copy of its top level with conditions of its own is all it needs.
		pod := schemas.TopLevelCopy(cur).(*corev1.Pod)
		pod.Status.Conditions = slices.Clone(pod.Status.Conditions)
		if pod.Spec.NodeName != "" {
			return nil, casDecided, apierrors.NewConflict(groupResource(k), name, fmt.Errorf("pod %s is already assigned to node %q", name, pod.Spec.NodeName))
		}
		if pod.DeletionTimestamp != nil {
			return nil, casDecided, apierrors.NewConflict(groupResource(k), name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", name))
		}
		if b.UID != "" && b.UID != pod.UID {
			return nil, casDecided, apierrors.NewConflict(groupResource(k), name, errors.New("the binding's UID does not match the pod"))
		}
		if err := s.admit(ctx, &Attributes{Verb: "create", Kind: k, Namespace: ns, Name: name, Subresource: "binding", Object: pod, OldObject: cur}); err != nil {
			return nil, casDecided, err
		}
		pod.Spec.NodeName = b.Target.Name
		setPodCondition(&pod.Status, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(s.now().UTC())})
		if wo.dryRun {
			return bound, casDecided, nil
		}
		buf := borrowStorageBuffer()
		defer buf.release()
		data, err := buf.encode(pod)
		if err != nil {
			return nil, casDecided, apierrors.NewInternalError(err)
		}
		if _, err := s.log.Update(ctx, schemas.StorageKey(k, ns, name), data, rev, traceHeader(ctx)); err != nil {
			if errors.Is(err, statelog.ErrConflict) {
				return nil, casDecided, conflict(k, name)
			}
			return nil, casDecided, writeFailed(err)
		}
		return bound, casWritten, nil
	})
}

func setPodCondition(st *corev1.PodStatus, c corev1.PodCondition) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == c.Type {
			if st.Conditions[i].Status == c.Status {
				return
			}
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}

// getScale and updateScale serve the scale subresource (kubectl scale) of Deployments,
// ReplicaSets, StatefulSets and custom resources.
func (s *Server) getScale(ctx context.Context, k *schemas.Kind, ns, name string) (runtime.Object, error) {
	obj, err := s.get(ctx, k, ns, name)
	if err != nil {
		return nil, err
	}
	return scaleOf(obj)
}

func scaleOf(obj runtime.Object) (*autoscalingv1.Scale, error) {
	m := mustMeta(obj)
	sc := &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{Kind: "Scale", APIVersion: "autoscaling/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(),
			ResourceVersion: m.GetResourceVersion(), CreationTimestamp: m.GetCreationTimestamp()},
	}
	var sel *metav1.LabelSelector
	switch o := obj.(type) {
	case *appsv1.Deployment:
		sc.Spec.Replicas, sc.Status.Replicas, sel = deref(o.Spec.Replicas), o.Status.Replicas, o.Spec.Selector
	case *appsv1.ReplicaSet:
		sc.Spec.Replicas, sc.Status.Replicas, sel = deref(o.Spec.Replicas), o.Status.Replicas, o.Spec.Selector
	case *appsv1.StatefulSet:
		sc.Spec.Replicas, sc.Status.Replicas, sel = deref(o.Spec.Replicas), o.Status.Replicas, o.Spec.Selector
	case *unstructured.Unstructured:
		return customScale(sc, o)
	default:
		return nil, apierrors.NewBadRequest("this kind has no scale subresource")
	}
	if sel != nil {
		if ls, err := metav1.LabelSelectorAsSelector(sel); err == nil {
			sc.Status.Selector = ls.String()
		}
	}
	return sc, nil
}

// customScale reads a custom object's scale through its CRD's paths (specReplicasPath,
// statusReplicasPath, labelSelectorPath).
func customScale(sc *autoscalingv1.Scale, u *unstructured.Unstructured) (*autoscalingv1.Scale, error) {
	k, ok := schemas.ByGVK(u.GroupVersionKind())
	if !ok || k.Custom == nil || k.Custom.Scale() == nil {
		return nil, apierrors.NewBadRequest("this kind has no scale subresource")
	}
	p := k.Custom.Scale()
	spec, _, _ := unstructured.NestedInt64(u.Object, jsonPath(p.SpecReplicas)...)
	status, _, _ := unstructured.NestedInt64(u.Object, jsonPath(p.StatusReplicas)...)
	sc.Spec.Replicas, sc.Status.Replicas = int32(spec), int32(status)
	if p.LabelSelector != "" {
		sc.Status.Selector, _, _ = unstructured.NestedString(u.Object, jsonPath(p.LabelSelector)...)
	}
	return sc, nil
}

// jsonPath splits ".spec.replicas" into its fields.
func jsonPath(p string) []string { return strings.Split(strings.TrimPrefix(p, "."), ".") }

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func (s *Server) updateScale(ctx context.Context, k *schemas.Kind, ns, name string, body []byte, wo writeOptions) (runtime.Object, error) {
	var sc autoscalingv1.Scale
	if err := json.Unmarshal(body, &sc); err != nil {
		return nil, badRequest("Scale: %v", err)
	}
	if sc.Spec.Replicas < 0 {
		return nil, apierrors.NewInvalid(autoscalingv1.SchemeGroupVersion.WithKind("Scale").GroupKind(), name,
			field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), sc.Spec.Replicas, "must be greater than or equal to 0")})
	}
	wo.trackAs = "scale" // the replicas belong to the scaler's entry on the scale subresource
	obj, err := s.guaranteedUpdate(ctx, k, ns, name, "", "update", wo, edited(func(cur runtime.Object) (runtime.Object, error) {
		mustMeta(cur).SetResourceVersion(sc.ResourceVersion)
		r := sc.Spec.Replicas
		switch o := cur.(type) {
		case *appsv1.Deployment:
			o.Spec.Replicas = &r
		case *appsv1.ReplicaSet:
			o.Spec.Replicas = &r
		case *appsv1.StatefulSet:
			o.Spec.Replicas = &r
		case *unstructured.Unstructured:
			if p := k.Custom.Scale(); p != nil {
				if err := unstructured.SetNestedField(o.Object, int64(r), jsonPath(p.SpecReplicas)...); err != nil {
					return nil, badRequest("%s: %v", p.SpecReplicas, err)
				}
			}
		}
		return cur, nil
	}))
	if err != nil {
		return nil, err
	}
	return scaleOf(obj)
}
