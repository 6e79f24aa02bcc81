package clusterdns

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/informer"
)

// keepOwnFields makes the factory's Service and EndpointSlice informers cache only what the
// server reads (serviceRecords, serviceOf and the informers' indexes), as CoreDNS's kubernetes
// plugin converts objects to small ones of its own before caching them.
func keepOwnFields(f *informer.Factory) {
	f.Keep("", "services", func(o runtime.Object) runtime.Object { return dnsService(o.(*corev1.Service)) })
	f.Keep("discovery.k8s.io", "endpointslices", func(o runtime.Object) runtime.Object {
		return dnsSlice(o.(*discoveryv1.EndpointSlice))
	})
}

// dnsMeta is the metadata the caches and handlers read: the key and the revision.
func dnsMeta(m metav1.ObjectMeta, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, ResourceVersion: m.ResourceVersion, Labels: labels}
}

func dnsService(svc *corev1.Service) *corev1.Service {
	ports := make([]corev1.ServicePort, 0, len(svc.Spec.Ports))
	for _, p := range svc.Spec.Ports {
		if p.Name != "" { // only named ports have SRV records
			ports = append(ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port})
		}
	}
	return &corev1.Service{TypeMeta: svc.TypeMeta, ObjectMeta: dnsMeta(svc.ObjectMeta, nil), Spec: corev1.ServiceSpec{
		Type: svc.Spec.Type, ExternalName: svc.Spec.ExternalName, PublishNotReadyAddresses: svc.Spec.PublishNotReadyAddresses,
		ClusterIP: svc.Spec.ClusterIP, ClusterIPs: svc.Spec.ClusterIPs, Ports: ports,
	}}
}

func dnsSlice(es *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	var labels map[string]string
	if name := es.Labels[discoveryv1.LabelServiceName]; name != "" {
		labels = map[string]string{discoveryv1.LabelServiceName: name}
	}
	out := &discoveryv1.EndpointSlice{TypeMeta: es.TypeMeta, ObjectMeta: dnsMeta(es.ObjectMeta, labels), AddressType: es.AddressType}
	if es.AddressType != discoveryv1.AddressTypeIPv4 && es.AddressType != discoveryv1.AddressTypeIPv6 {
		return out // FQDN slices put nothing in the zone
	}
	out.Endpoints = make([]discoveryv1.Endpoint, len(es.Endpoints))
	for n, ep := range es.Endpoints {
		out.Endpoints[n] = discoveryv1.Endpoint{Addresses: ep.Addresses, Hostname: ep.Hostname,
			Conditions: discoveryv1.EndpointConditions{Ready: ep.Conditions.Ready}}
	}
	for _, p := range es.Ports {
		if p.Name != nil && *p.Name != "" && p.Port != nil {
			out.Ports = append(out.Ports, discoveryv1.EndpointPort{Name: p.Name, Protocol: p.Protocol, Port: p.Port})
		}
	}
	return out
}
