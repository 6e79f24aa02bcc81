package printers

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
		cells: typed(func(d *appsv1.Deployment, now time.Time) []any {
			return append([]any{d.Name, fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, replicasOf(d.Spec.Replicas)),
				int64(d.Status.UpdatedReplicas), int64(d.Status.AvailableReplicas), Age(d.CreationTimestamp, now)},
				workloadCells(d.Spec.Template, d.Spec.Selector)...)
		}),
	})
	register("replicasets", printer{
		columns: append([]metav1.TableColumnDefinition{nameColumn,
			col("Desired", "integer", "Number of desired pods."),
			col("Current", "integer", "Number of actual pods."),
			col("Ready", "integer", "Number of ready pods."),
			ageColumn,
		}, workloadWide...),
		cells: typed(func(rs *appsv1.ReplicaSet, now time.Time) []any {
			return append([]any{rs.Name, int64(replicasOf(rs.Spec.Replicas)), int64(rs.Status.Replicas), int64(rs.Status.ReadyReplicas),
				Age(rs.CreationTimestamp, now)}, workloadCells(rs.Spec.Template, rs.Spec.Selector)...)
		}),
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
		cells: typed(func(ds *appsv1.DaemonSet, now time.Time) []any {
			st := ds.Status
			return append([]any{ds.Name, int64(st.DesiredNumberScheduled), int64(st.CurrentNumberScheduled), int64(st.NumberReady),
				int64(st.UpdatedNumberScheduled), int64(st.NumberAvailable), orNone(labels.Set(ds.Spec.Template.Spec.NodeSelector).String()),
				Age(ds.CreationTimestamp, now)}, workloadCells(ds.Spec.Template, ds.Spec.Selector)...)
		}),
	})
	register("endpointslices", printer{
		columns: []metav1.TableColumnDefinition{nameColumn,
			col("AddressType", "string", "The type of addresses in the slice."),
			col("Ports", "string", "The ports of the slice."),
			col("Endpoints", "string", "The first addresses of the slice."),
			ageColumn,
		},
		cells: typed(func(s *discoveryv1.EndpointSlice, now time.Time) []any {
			return []any{s.Name, string(s.AddressType), slicePorts(s.Ports), sliceEndpoints(s.Endpoints), Age(s.CreationTimestamp, now)}
		}),
	})
	register("leases", printer{
		columns: []metav1.TableColumnDefinition{nameColumn, col("Holder", "string", "The holder of the lease."), ageColumn},
		cells: typed(func(l *coordinationv1.Lease, now time.Time) []any {
			holder := ""
			if l.Spec.HolderIdentity != nil {
				holder = *l.Spec.HolderIdentity
			}
			return []any{l.Name, holder, Age(l.CreationTimestamp, now)}
		}),
	})
}

// workloadCells are the cells of the workloadWide columns.
func workloadCells(tmpl corev1.PodTemplateSpec, sel *metav1.LabelSelector) []any {
	names, images := containersAndImages(tmpl.Spec.Containers)
	return []any{names, images, selectorString(sel)}
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
