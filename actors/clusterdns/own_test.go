package clusterdns_test

import (
	"slices"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/skiff-sh/skiff/actors/clusterdns"
	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/informer"
)

// A server with informers of its own (skiff dns) caches small objects of its own and answers every
// kind of record as one on a node's shared informers does, which keep whole objects for the
// proxy.
func TestOwnInformersAnswerAsShared(t *testing.T) {
	cp := ct.Start(t)
	shared := serve(t, cp, clusterdns.Config{Informers: cp.Informers, NodeName: "shared"})
	own := informer.NewFactory(cp.Log)
	ct.Spawn(t, cp, "own-informers", own.Actor())
	alone := serve(t, cp, clusterdns.Config{Informers: own, OwnInformers: true, NodeName: "alone"})

	shared.create(service("web", func(s *corev1.Service) {
		s.Labels = map[string]string{"app": "web"}
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP})
	}))
	shared.create(service("db", func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }))
	shared.create(service("peers", func(s *corev1.Service) {
		s.Spec.ClusterIP = corev1.ClusterIPNone
		s.Spec.PublishNotReadyAddresses = true
	}))
	shared.create(service("ext", func(s *corev1.Service) {
		s.Spec.Type, s.Spec.ExternalName, s.Spec.Ports = corev1.ServiceTypeExternalName, "example.test", nil
	}))
	dbSlice := slice("db", "db-1", 5432, endpoint{ip: "10.1.0.5", hostname: "db-0", ready: true},
		endpoint{ip: "10.1.0.6", ready: false}, endpoint{ip: "10.1.0.7", ready: true})
	dbSlice.Endpoints[0].NodeName = new("n1")
	dbSlice.Endpoints[0].TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: "db-0", Namespace: "default"}
	shared.create(dbSlice)
	shared.create(slice("peers", "peers-1", 7000, endpoint{ip: "10.1.0.8", hostname: "p-0", ready: false}))

	const zone = ".default.svc.cluster.local."
	last := []string{"A 10.1.0.8"}
	shared.waitAnswer("peers"+zone, dns.TypeA, last...)
	alone.waitAnswer("peers"+zone, dns.TypeA, last...)
	web := shared.query("web"+zone, dns.TypeA)
	if len(web.Answer) != 1 {
		t.Fatalf("web: %v", web)
	}
	rev, _ := dns.ReverseAddr(web.Answer[0].(*dns.A).A.String())
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"web" + zone, dns.TypeA}, {"_http._tcp.web" + zone, dns.TypeSRV}, {"_dns._udp.web" + zone, dns.TypeSRV},
		{"_tcp.web" + zone, dns.TypeSRV}, {rev, dns.TypePTR},
		{"db" + zone, dns.TypeA}, {"db-0.db" + zone, dns.TypeA}, {"10-1-0-7.db" + zone, dns.TypeA},
		{"10-1-0-6.db" + zone, dns.TypeA}, {"_http._tcp.db" + zone, dns.TypeSRV}, {"5.0.1.10.in-addr.arpa.", dns.TypePTR},
		{"p-0.peers" + zone, dns.TypeA}, {"ext" + zone, dns.TypeCNAME},
	} {
		want, got := shared.query(q.name, q.qtype), alone.query(q.name, q.qtype)
		if want.Rcode != got.Rcode || !slices.Equal(values(want), values(got)) {
			t.Errorf("%s %s: own informers answer %s %q, shared ones %s %q", q.name, dns.TypeToString[q.qtype],
				dns.RcodeToString[got.Rcode], values(got), dns.RcodeToString[want.Rcode], values(want))
		}
	}
	if len(values(shared.query("db-0.db"+zone, dns.TypeA))) != 1 {
		t.Fatal("the shared server does not answer db-0: the comparison compared nothing")
	}

	// The own caches hold the server's small objects; the shared ones the API's whole.
	for _, r := range []struct{ group, resource, name string }{{"", "services", "web"}, {"discovery.k8s.io", "endpointslices", "db-1"}} {
		o, ok := own.For(r.group, r.resource).Get("default", r.name)
		if !ok || o.GetObjectKind().GroupVersionKind().Kind != "" {
			t.Errorf("own %s cache holds %T %v, want the server's own objects", r.resource, o, ok)
		}
		if o, _ := cp.Informers.For(r.group, r.resource).Get("default", r.name); o.GetObjectKind().GroupVersionKind().Kind == "" {
			t.Errorf("shared %s cache holds %T, want the API's objects", r.resource, o)
		}
	}
	sharedES, _ := informer.Shared[*discoveryv1.EndpointSlice](cp.Informers, "discovery.k8s.io", "endpointslices").Get("default", "db-1")
	if ep := sharedES.Endpoints[0]; ep.NodeName == nil || ep.TargetRef == nil {
		t.Errorf("shared EndpointSlice cache was trimmed: %+v", sharedES)
	}

	// Trimming a cache that others already read whole is refused.
	defer func() {
		if recover() == nil {
			t.Error("OwnInformers on a factory that already has the informers did not panic")
		}
	}()
	clusterdns.New(clusterdns.Config{Informers: cp.Informers, OwnInformers: true})
}
