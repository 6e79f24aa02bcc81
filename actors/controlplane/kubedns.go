package controlplane

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The `kube-dns` Service in `kube-system` is the address pods' resolv.conf names (kubeadm's
// name and address: the service range's tenth, 10.96.0.10, which the allocator never hands
// out). The apiservers keep it as they keep `kubernetes`: created when missing, its ports put
// back. It has no selector and no endpoints: every node's proxy sends it to the DNS server of
// its own node (actors/clusterdns), so a pod's lookups never leave its node.
const (
	KubeDNSService   = "kube-dns"
	KubeDNSNamespace = metav1.NamespaceSystem
	kubeDNSOffset    = 10
)

func (cp *ControlPlane) ensureKubeDNS(ctx context.Context) error {
	ip, err := cp.serviceIP(kubeDNSOffset)
	if err != nil {
		return err
	}
	return cp.ensureOwnService(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: KubeDNSService, Namespace: KubeDNSNamespace,
			Labels: map[string]string{"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, SessionAffinity: corev1.ServiceAffinityNone,
			Ports: []corev1.ServicePort{
				{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(53)},
			}},
	})
}
