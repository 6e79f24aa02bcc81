package printers

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

var workloadWide = []metav1.TableColumnDefinition{
	wide("Containers", "string", "Names of each container in the template."),
	wide("Images", "string", "Images referenced by each container in the template."),
	wide("Selector", "string", "Label selector for pods."),
}

func init() {
	register("deployments", printer{
		columns: append([]metav1.TableColumnDefinition{nameColumn,
			col("Ready", "string", "Number of the pod with ready state"),
			col("Up-to-date", "integer", "Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
			col("Available", "integer", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."),
			ageColumn,
		}, workloadWide...),
		cells: func(obj runtime.Object, now time.Time) []any {
			d, ok := obj.(*appsv1.Deployment)
			if !ok {
				return nil
			}
			names, images := containersAndImages(d.Spec.Template.Spec.Containers)
			return []any{d.Name, fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, replicasOf(d.Spec.Replicas)),
				int64(d.Status.UpdatedReplicas), int64(d.Status.AvailableReplicas), Age(d.CreationTimestamp, now),
				names, images, selectorString(d.Spec.Selector)}
		},
	})
	register("replicasets", printer{
		columns: append([]metav1.TableColumnDefinition{nameColumn,
			col("Desired", "integer", "Number of desired pods."),
			col("Current", "integer", "Number of actual pods."),
			col("Ready", "integer", "Number of ready pods."),
			ageColumn,
		}, workloadWide...),
		cells: func(obj runtime.Object, now time.Time) []any {
			rs, ok := obj.(*appsv1.ReplicaSet)
			if !ok {
				return nil
			}
			names, images := containersAndImages(rs.Spec.Template.Spec.Containers)
			return []any{rs.Name, int64(replicasOf(rs.Spec.Replicas)), int64(rs.Status.Replicas), int64(rs.Status.ReadyReplicas),
				Age(rs.CreationTimestamp, now), names, images, selectorString(rs.Spec.Selector)}
		},
	})
	register("daemonsets", printer{
		columns: append([]metav1.TableColumnDefinition{nameColumn,
			col("Desired", "integer", "The number of nodes that should be running the daemon pod."),
			col("Current", "integer", "The number of nodes running at least one daemon pod."),
			col("Ready", "integer", "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready."),
			col("Up-to-date", "integer", "The number of nodes running the updated daemon pod."),
			col("Available", "integer", "The number of nodes running the daemon pod and available."),
			col("Node Selector", "string", "The node selector of the daemon pods."),
			ageColumn,
		}, workloadWide...),
		cells: func(obj runtime.Object, now time.Time) []any {
			ds, ok := obj.(*appsv1.DaemonSet)
			if !ok {
				return nil
			}
			names, images := containersAndImages(ds.Spec.Template.Spec.Containers)
			st := ds.Status
			return []any{ds.Name, int64(st.DesiredNumberScheduled), int64(st.CurrentNumberScheduled), int64(st.NumberReady),
				int64(st.UpdatedNumberScheduled), int64(st.NumberAvailable), orNone(labels.Set(ds.Spec.Template.Spec.NodeSelector).String()),
				Age(ds.CreationTimestamp, now), names, images, selectorString(ds.Spec.Selector)}
		},
	})
	register("endpointslices", printer{
		columns: []metav1.TableColumnDefinition{nameColumn,
			col("AddressType", "string", "The type of addresses in the slice."),
			col("Ports", "string", "The ports of the slice."),
			col("Endpoints", "string", "The first addresses of the slice."),
			ageColumn,
		},
		cells: func(obj runtime.Object, now time.Time) []any {
			s, ok := obj.(*discoveryv1.EndpointSlice)
			if !ok {
				return nil
			}
			return []any{s.Name, string(s.AddressType), slicePorts(s.Ports), sliceEndpoints(s.Endpoints), Age(s.CreationTimestamp, now)}
		},
	})
	register("leases", printer{
		columns: []metav1.TableColumnDefinition{nameColumn, col("Holder", "string", "The holder of the lease."), ageColumn},
		cells: func(obj runtime.Object, now time.Time) []any {
			l, ok := obj.(*coordinationv1.Lease)
			if !ok {
				return nil
			}
			holder := ""
			if l.Spec.HolderIdentity != nil {
				holder = *l.Spec.HolderIdentity
			}
			return []any{l.Name, holder, Age(l.CreationTimestamp, now)}
		},
	})
}

func replicasOf(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

func selectorString(s *metav1.LabelSelector) string {
	if s == nil {
		return "<none>"
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return "<invalid>"
	}
	return orNone(sel.String())
}

// maxShownEndpoints is how many addresses the ENDPOINTS column lists before "+ N more...".
const maxShownEndpoints = 3

func slicePorts(ports []discoveryv1.EndpointPort) string {
	if len(ports) == 0 {
		return "<unset>"
	}
	parts := make([]string, len(ports))
	for i, p := range ports {
		parts[i] = "<unset>"
		if p.Port != nil {
			parts[i] = fmt.Sprint(*p.Port)
		}
	}
	return strings.Join(parts, ",")
}

func sliceEndpoints(eps []discoveryv1.Endpoint) string {
	var addrs []string
	for _, e := range eps {
		addrs = append(addrs, e.Addresses...)
	}
	if len(addrs) == 0 {
		return "<unset>"
	}
	if len(addrs) <= maxShownEndpoints {
		return strings.Join(addrs, ",")
	}
	return fmt.Sprintf("%s + %d more...", strings.Join(addrs[:maxShownEndpoints], ","), len(addrs)-maxShownEndpoints)
}
