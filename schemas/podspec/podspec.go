// Package podspec answers questions about a pod spec that the API's validation, the
// scheduler, the kubelet and kubectl's printers must answer alike.
package podspec

import corev1 "k8s.io/api/core/v1"

// IsSidecar reports whether an init container is a restartable one (restartPolicy Always): it
// keeps running beside the app containers and is restarted whatever the pod's restartPolicy.
func IsSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}
