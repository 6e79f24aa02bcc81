package clusterdns

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/actors/informer"
)

// keepOwnFields makes the factory's Service and EndpointSlice informers cache the server's own
// small objects instead of API ones, as CoreDNS's kubernetes plugin converts objects before
// caching them: an API Service is 592 bytes before any of its fields point anywhere.
func keepOwnFields(f *informer.Factory) {
	f.Keep("", "services", func(o runtime.Object) runtime.Object { return toService(o.(*corev1.Service)) })
	f.Keep("discovery.k8s.io", "endpointslices", func(o runtime.Object) runtime.Object {
		return toSlice(o.(*discoveryv1.EndpointSlice))
	})
}

// dnsService is what the zone reads of a Service.
type dnsService struct {
	Namespace, Name string
	Type            corev1.ServiceType
	ExternalName    string
	ClusterIPs      []string  // ClusterIPs, or ClusterIP alone when that is unset
	Ports           []dnsPort // the named ones: only they have SRV records
	PublishNotReady bool
}

// dnsPort is a named port of a Service or slice.
type dnsPort struct {
	Name     string
	Protocol corev1.Protocol
	Port     int32
}

// dnsSlice is what the zone reads of an EndpointSlice of addresses.
type dnsSlice struct {
	Namespace, Name string
	Service         string // the Service's key; "" if unlabelled
	Endpoints       []dnsEndpoint
	Ports           []dnsPort
}

type dnsEndpoint struct {
	Addresses []string
	Hostname  string
	Ready     bool // an unset condition is ready
}

func toService(svc *corev1.Service) *dnsService {
	out := &dnsService{Namespace: svc.Namespace, Name: svc.Name, Type: svc.Spec.Type, ExternalName: svc.Spec.ExternalName,
		ClusterIPs: svc.Spec.ClusterIPs, PublishNotReady: svc.Spec.PublishNotReadyAddresses}
	if len(out.ClusterIPs) == 0 && svc.Spec.ClusterIP != "" {
		out.ClusterIPs = []string{svc.Spec.ClusterIP}
	}
	for _, p := range svc.Spec.Ports {
		if p.Name != "" {
			out.Ports = append(out.Ports, dnsPort{Name: p.Name, Protocol: p.Protocol, Port: p.Port})
		}
	}
	return out
}

func (s *dnsService) headless() bool {
	return len(s.ClusterIPs) > 0 && s.ClusterIPs[0] == corev1.ClusterIPNone
}

func toSlice(es *discoveryv1.EndpointSlice) *dnsSlice {
	out := &dnsSlice{Namespace: es.Namespace, Name: es.Name}
	if name := es.Labels[discoveryv1.LabelServiceName]; name != "" {
		out.Service = key(es.Namespace, name)
	}
	if es.AddressType != discoveryv1.AddressTypeIPv4 && es.AddressType != discoveryv1.AddressTypeIPv6 {
		return out // FQDN slices name no address
	}
	out.Endpoints = make([]dnsEndpoint, len(es.Endpoints))
	for n, ep := range es.Endpoints {
		out.Endpoints[n] = dnsEndpoint{Addresses: ep.Addresses, Ready: ep.Conditions.Ready == nil || *ep.Conditions.Ready}
		if ep.Hostname != nil {
			out.Endpoints[n].Hostname = *ep.Hostname
		}
	}
	for _, p := range es.Ports {
		if p.Name != nil && *p.Name != "" && p.Port != nil {
			proto := corev1.ProtocolTCP // the API's default
			if p.Protocol != nil {
				proto = *p.Protocol
			}
			out.Ports = append(out.Ports, dnsPort{Name: *p.Name, Protocol: proto, Port: *p.Port})
		}
	}
	return out
}

// asService and asSlice read a cached object of either form: the server's own (OwnInformers)
// or the API's (informers shared with a node's proxy), converted per read.
func asService(o runtime.Object) *dnsService {
	if s, ok := o.(*dnsService); ok {
		return s
	}
	return toService(o.(*corev1.Service))
}

func asSlice(o runtime.Object) *dnsSlice {
	if s, ok := o.(*dnsSlice); ok {
		return s
	}
	return toSlice(o.(*discoveryv1.EndpointSlice))
}

// The informers cache runtime.Objects, file them by namespace and hand them to handlers.

func (s *dnsService) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (s *dnsService) GetNamespace() string             { return s.Namespace }
func (s *dnsService) GetName() string                  { return s.Name }
func (s *dnsService) DeepCopyObject() runtime.Object {
	c := *s
	c.ClusterIPs = append([]string(nil), s.ClusterIPs...)
	c.Ports = append([]dnsPort(nil), s.Ports...)
	return &c
}

func (s *dnsSlice) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (s *dnsSlice) GetNamespace() string             { return s.Namespace }
func (s *dnsSlice) GetName() string                  { return s.Name }
func (s *dnsSlice) DeepCopyObject() runtime.Object {
	c := *s
	c.Ports = append([]dnsPort(nil), s.Ports...)
	c.Endpoints = make([]dnsEndpoint, len(s.Endpoints))
	for n, ep := range s.Endpoints {
		c.Endpoints[n] = ep
		c.Endpoints[n].Addresses = append([]string(nil), ep.Addresses...)
	}
	return &c
}
