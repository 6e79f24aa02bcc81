package apiserver

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/schemas"
)

// selector is a parsed labelSelector + fieldSelector pair.
type selector struct {
	label labels.Selector
	field fields.Selector
}

func parseSelectors(info requestInfo) (selector, error) {
	sel := selector{label: labels.Everything(), field: fields.Everything()}
	var err error
	if ls := info.query.Get("labelSelector"); ls != "" {
		if sel.label, err = labels.Parse(ls); err != nil {
			return sel, badRequest("labelSelector: %v", err)
		}
	}
	if fs := info.query.Get("fieldSelector"); fs != "" {
		if sel.field, err = fields.ParseSelector(fs); err != nil {
			return sel, badRequest("fieldSelector: %v", err)
		}
	}
	return sel, nil
}

// validateFields rejects field selectors on fields the kind does not index, as Kubernetes does.
func (sel selector) validateFields(sample runtime.Object) error {
	have := objectFields(sample)
	for _, r := range sel.field.Requirements() {
		if _, ok := have[r.Field]; !ok {
			return badRequest("fieldSelector: field label not supported: %s", r.Field)
		}
	}
	return nil
}

func (sel selector) matches(obj runtime.Object) bool {
	return sel.matchesWith(obj, func() fields.Set { return objectFields(obj) })
}

// matchesEvent matches a watched object shared by every watcher, its fields computed once.
func (sel selector) matchesEvent(e *sharedEvent) bool {
	return e != nil && sel.matchesWith(e.obj, e.selectable)
}

// matchesWith asks for the object's fields only when there is a field selector to apply.
func (sel selector) matchesWith(obj runtime.Object, fieldSet func() fields.Set) bool {
	if obj == nil || !sel.label.Matches(labels.Set(mustMeta(obj).GetLabels())) {
		return false
	}
	return sel.field.Empty() || sel.field.Matches(fieldSet())
}

func (sel selector) everything() bool { return sel.label.Empty() && sel.field.Empty() }

// objectFields are the selectable fields of each kind (the same set Kubernetes offers).
func objectFields(obj runtime.Object) fields.Set {
	m := mustMeta(obj)
	set := fields.Set{"metadata.name": m.GetName()}
	if m.GetNamespace() != "" {
		set["metadata.namespace"] = m.GetNamespace()
	} else {
		set["metadata.namespace"] = ""
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		set["spec.nodeName"] = o.Spec.NodeName
		set["spec.restartPolicy"] = string(o.Spec.RestartPolicy)
		set["spec.schedulerName"] = o.Spec.SchedulerName
		set["spec.serviceAccountName"] = o.Spec.ServiceAccountName
		set["spec.hostNetwork"] = strconv.FormatBool(o.Spec.HostNetwork)
		set["status.phase"] = string(o.Status.Phase)
		set["status.podIP"] = o.Status.PodIP
		set["status.nominatedNodeName"] = o.Status.NominatedNodeName
	case *corev1.Node:
		set["spec.unschedulable"] = strconv.FormatBool(o.Spec.Unschedulable)
	case *corev1.Namespace:
		set["status.phase"] = string(o.Status.Phase)
	case *corev1.Secret:
		set["type"] = string(o.Type)
	case *corev1.Event:
		set["involvedObject.kind"] = o.InvolvedObject.Kind
		set["involvedObject.namespace"] = o.InvolvedObject.Namespace
		set["involvedObject.name"] = o.InvolvedObject.Name
		set["involvedObject.uid"] = string(o.InvolvedObject.UID)
		set["involvedObject.apiVersion"] = o.InvolvedObject.APIVersion
		set["involvedObject.resourceVersion"] = o.InvolvedObject.ResourceVersion
		set["involvedObject.fieldPath"] = o.InvolvedObject.FieldPath
		set["reason"] = o.Reason
		set["reportingComponent"] = o.ReportingController
		set["source"] = o.Source.Component
		set["type"] = o.Type
	case *appsv1.ReplicaSet:
		set["status.replicas"] = fmt.Sprint(o.Status.Replicas)
	default:
		schemas.AddSelectableFields(obj, set)
	}
	return set
}
