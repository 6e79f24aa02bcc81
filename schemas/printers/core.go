package printers

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func init() {
	register("namespaces", printer{
		columns: []metav1.TableColumnDefinition{nameColumn, col("Status", "string", "The status of the namespace"), ageColumn},
		cells: typed(func(ns *corev1.Namespace, now time.Time) []any {
			return []any{ns.Name, string(ns.Status.Phase), Age(ns.CreationTimestamp, now)}
		}),
	})
	register("services", printer{
		columns: []metav1.TableColumnDefinition{nameColumn,
			col("Type", "string", "The type of the service."),
			col("Cluster-IP", "string", "The cluster IP of the service."),
			col("External-IP", "string", "The external IPs of the service."),
			col("Port(s)", "string", "The ports of the service."),
			ageColumn,
			wide("Selector", "string", "The label selector of the service."),
		},
		cells: typed(serviceCells),
	})
	register("nodes", printer{
		columns: []metav1.TableColumnDefinition{nameColumn,
			col("Status", "string", "The status of the node"),
			col("Roles", "string", "The roles of the node"),
			ageColumn,
			col("Version", "string", "Kubelet Version reported by the node."),
			wide("Internal-IP", "string", "The node's internal IP."),
			wide("External-IP", "string", "The node's external IP."),
			wide("OS-Image", "string", "OS image reported by the node."),
			wide("Kernel-Version", "string", "Kernel version reported by the node."),
			wide("Container-Runtime", "string", "Container runtime reported by the node."),
		},
		cells: typed(nodeCells),
	})
	register("events", printer{
		columns: []metav1.TableColumnDefinition{
			col("Last Seen", "string", "Time since the event was last seen."),
			col("Type", "string", "Type of the event."),
			col("Reason", "string", "Why the event happened."),
			col("Object", "string", "The object the event is about."),
			wide("Subobject", "string", "The part of the object the event is about."),
			wide("Source", "string", "The component that reported the event."),
			col("Message", "string", "A description of the event."),
			wide("First Seen", "string", "Time since the event was first seen."),
			wide("Count", "integer", "How many times the event happened."),
			wide("Name", "string", "Name of the event."),
		},
		cells: typed(eventCells),
	})
	register("configmaps", printer{
		columns: []metav1.TableColumnDefinition{nameColumn, col("Data", "integer", "Number of keys."), ageColumn},
		cells: typed(func(cm *corev1.ConfigMap, now time.Time) []any {
			return []any{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), Age(cm.CreationTimestamp, now)}
		}),
	})
	register("secrets", printer{
		columns: []metav1.TableColumnDefinition{nameColumn, col("Type", "string", "The type of the secret."),
			col("Data", "integer", "Number of keys."), ageColumn},
		cells: typed(func(s *corev1.Secret, now time.Time) []any {
			return []any{s.Name, string(s.Type), int64(len(s.Data)), Age(s.CreationTimestamp, now)}
		}),
	})
	register("serviceaccounts", printer{
		columns: []metav1.TableColumnDefinition{nameColumn, col("Secrets", "string", "Secrets is the list of secrets allowed to be used by pods running using this ServiceAccount."), ageColumn},
		cells: typed(func(sa *corev1.ServiceAccount, now time.Time) []any {
			return []any{sa.Name, int64(len(sa.Secrets)), Age(sa.CreationTimestamp, now)}
		}),
	})
}

func serviceCells(s *corev1.Service, now time.Time) []any {
	clusterIP := orNone(s.Spec.ClusterIP)
	if s.Spec.Type == corev1.ServiceTypeExternalName {
		clusterIP = "<none>"
	}
	var sel string
	if len(s.Spec.Selector) > 0 {
		sel = labels.Set(s.Spec.Selector).String()
	}
	return []any{s.Name, string(s.Spec.Type), clusterIP, externalIPs(s), servicePorts(s.Spec.Ports),
		Age(s.CreationTimestamp, now), orNone(sel)}
}

func externalIPs(s *corev1.Service) string {
	ips := append([]string(nil), s.Spec.ExternalIPs...)
	switch s.Spec.Type {
	case corev1.ServiceTypeExternalName:
		return s.Spec.ExternalName
	case corev1.ServiceTypeLoadBalancer:
		for _, in := range s.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				ips = append(ips, in.IP)
			} else if in.Hostname != "" {
				ips = append(ips, in.Hostname)
			}
		}
		if len(ips) == 0 {
			return "<pending>"
		}
	}
	return orNone(strings.Join(ips, ","))
}

// servicePorts renders "80/TCP,443:30443/TCP".
func servicePorts(ports []corev1.ServicePort) string {
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		s := strconv.Itoa(int(p.Port))
		if p.NodePort != 0 {
			s += ":" + strconv.Itoa(int(p.NodePort))
		}
		parts = append(parts, s+"/"+string(p.Protocol))
	}
	return orNone(strings.Join(parts, ","))
}

func nodeCells(n *corev1.Node, now time.Time) []any {
	status := "Unknown"
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			switch c.Status {
			case corev1.ConditionTrue:
				status = "Ready"
			case corev1.ConditionFalse:
				status = "NotReady"
			}
		}
	}
	if n.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	info := n.Status.NodeInfo
	return []any{n.Name, status, nodeRoles(n), Age(n.CreationTimestamp, now), info.KubeletVersion,
		orNone(nodeAddress(n, corev1.NodeInternalIP)), orNone(nodeAddress(n, corev1.NodeExternalIP)),
		info.OSImage, info.KernelVersion, info.ContainerRuntimeVersion}
}

// Node role labels: "node-role.kubernetes.io/<role>" (any value) and "kubernetes.io/role=<role>".
const (
	roleLabelPrefix = "node-role.kubernetes.io/"
	roleLabel       = "kubernetes.io/role"
)

func nodeRoles(n *corev1.Node) string {
	var roles []string
	for k, v := range n.Labels {
		switch {
		case strings.HasPrefix(k, roleLabelPrefix):
			if r := strings.TrimPrefix(k, roleLabelPrefix); r != "" {
				roles = append(roles, r)
			}
		case k == roleLabel && v != "":
			roles = append(roles, v)
		}
	}
	sort.Strings(roles)
	return orNone(strings.Join(roles, ","))
}

func nodeAddress(n *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range n.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return ""
}

func eventCells(e *corev1.Event, now time.Time) []any {
	first, last := e.FirstTimestamp, e.LastTimestamp
	if last.IsZero() {
		last = metav1.NewTime(e.EventTime.Time)
	}
	if e.Series != nil && !e.Series.LastObservedTime.IsZero() {
		last = metav1.NewTime(e.Series.LastObservedTime.Time)
	}
	if first.IsZero() {
		first = metav1.NewTime(e.EventTime.Time)
	}
	count := e.Count
	if e.Series != nil {
		count = e.Series.Count
	}
	lastSeen := Age(last, now)
	if count > 1 && !first.IsZero() {
		lastSeen = fmt.Sprintf("%s (x%d over %s)", lastSeen, count, Age(first, now))
	}
	object := strings.ToLower(e.InvolvedObject.Kind) + "/" + e.InvolvedObject.Name
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	if e.Source.Host != "" {
		source += ", " + e.Source.Host
	}
	return []any{lastSeen, e.Type, e.Reason, object, e.InvolvedObject.FieldPath, source,
		strings.TrimSpace(e.Message), Age(first, now), int64(count), e.Name}
}
