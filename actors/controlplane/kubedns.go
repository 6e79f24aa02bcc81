package controlplane

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skiff-sh/skiff/schemas"
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

func kubeDNSPorts() []corev1.ServicePort {
	return []corev1.ServicePort{
		{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(53)},
		{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(53)},
	}
}

func (cp *ControlPlane) ensureKubeDNS(ctx context.Context) error {
	k, _ := schemas.ByResource("", "v1", "services")
	ip, err := cp.serviceIP(kubeDNSOffset)
	if err != nil {
		return err
	}
	obj, err := cp.Client.Get(ctx, k, KubeDNSNamespace, KubeDNSService)
	if apierrors.IsNotFound(err) {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: KubeDNSService, Namespace: KubeDNSNamespace,
				Labels: map[string]string{"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS", "kubernetes.io/cluster-service": "true"}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, Ports: kubeDNSPorts(), SessionAffinity: corev1.ServiceAffinityNone},
		}
		_, err = cp.Client.Create(ctx, svc)
		if apierrors.IsAlreadyExists(err) {
			return nil // another replica was first
		}
		return err
	}
	if err != nil {
		return err
	}
	svc := obj.(*corev1.Service)
	if slices.EqualFunc(svc.Spec.Ports, kubeDNSPorts(), func(a, b corev1.ServicePort) bool {
		return a.Name == b.Name && a.Protocol == b.Protocol && a.Port == b.Port && a.TargetPort == b.TargetPort
	}) {
		return nil
	}
	svc = svc.DeepCopy()
	svc.Spec.Ports = kubeDNSPorts()
	_, err = cp.Client.Update(ctx, svc)
	return err
}
