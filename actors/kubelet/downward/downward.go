// Package downward resolves the downward API for a pod on this node: the values of fieldRef
// and resourceFieldRef selectors, for environment variables and downwardAPI volume files
// alike, with Kubernetes' formats (label and annotation maps as key="value" lines, resources
// rounded up in units of the divisor, unset limits read as the node's allocatable).
package downward

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Node is what the pod's values depend on beyond the pod object.
type Node struct {
	PodIP, HostIP string
	Allocatable   corev1.ResourceList // the node's; stands in for an unset limit
}

// FieldValue is the value of a fieldRef on pod.
func FieldValue(pod *corev1.Pod, path string, n Node) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return FormatMap(pod.Labels), nil
	case "metadata.annotations":
		return FormatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return n.PodIP, nil
	case "status.hostIP", "status.hostIPs":
		return n.HostIP, nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if rest, ok := strings.CutPrefix(path, prefix+"['"); ok && strings.HasSuffix(rest, "']") {
			return m[strings.TrimSuffix(rest, "']")], nil
		}
	}
	return "", fmt.Errorf("unsupported fieldPath %q", path)
}

// FormatMap writes a map as sorted key="value" lines, values quoted as Go strings.
func FormatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q\n", k, m[k])
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// ResourceValue is the value of a resourceFieldRef on the named container of pod.
func ResourceValue(pod *corev1.Pod, container string, ref *corev1.ResourceFieldSelector, n Node) (string, error) {
	if ref.ContainerName != "" {
		container = ref.ContainerName
	}
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == container {
			c = &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == container {
			c = &pod.Spec.InitContainers[i]
		}
	}
	if c == nil {
		return "", fmt.Errorf("resourceFieldRef: container %q not found in pod %s/%s", container, pod.Namespace, pod.Name)
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("unsupported container resource: %v", ref.Resource)
	}
	list := c.Resources.Requests
	if kind == "limits" {
		list = c.Resources.Limits
	}
	q, set := list[corev1.ResourceName(name)]
	if !set && kind == "limits" {
		q = n.Allocatable[corev1.ResourceName(name)]
	}
	switch corev1.ResourceName(name) {
	case corev1.ResourceCPU:
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	case corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
	}
	if strings.HasPrefix(name, corev1.ResourceHugePagesPrefix) {
		return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
	}
	return "", fmt.Errorf("unsupported container resource: %v", ref.Resource)
}
