package clusterdns_test

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/clusterdns"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	ct "github.com/skiff-sh/skiff/actors/controllers/controllertest"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/schemas"
)

// fixture is a control plane with only the apiserver, the DNS actor on the shared informers
// and a fake upstream resolver standing in for the node's.
type fixture struct {
	t        *testing.T
	cp       *controlplane.ControlPlane
	srv      *clusterdns.Server
	pid      *actorkit.PID
	upstream *fakeUpstream
}

func start(t *testing.T) *fixture {
	t.Helper()
	cp := ct.Start(t)
	return serve(t, cp, clusterdns.Config{Informers: cp.Informers, NodeName: "n1"})
}

// serve runs a DNS server of cfg on cp (on a free port, with a fake upstream) and waits until
// it listens.
func serve(t *testing.T, cp *controlplane.ControlPlane, cfg clusterdns.Config) *fixture {
	t.Helper()
	up := startUpstream(t)
	cfg.Listen, cfg.Upstreams = "127.0.0.1:0", []string{up.addr}
	srv := clusterdns.New(cfg)
	pid := ct.Spawn(t, cp, "clusterdns-"+cfg.NodeName, srv.Producer())
	f := &fixture{t: t, cp: cp, srv: srv, pid: pid, upstream: up}
	f.addr()
	return f
}

// addr waits until the server listens (after the informers synced).
func (f *fixture) addr() string {
	f.t.Helper()
	var a string
	ct.Wait(f.t, func() error {
		if a = f.srv.Addr(); a == "" {
			return fmt.Errorf("not serving yet")
		}
		return nil
	})
	return a
}

func (f *fixture) query(name string, qtype uint16) *dns.Msg {
	f.t.Helper()
	return f.exchange("udp", name, qtype)
}

func (f *fixture) exchange(network, name string, qtype uint16) *dns.Msg {
	f.t.Helper()
	r, err := f.try(network, name, qtype)
	if err != nil {
		f.t.Fatalf("%s %s over %s: %v", name, dns.TypeToString[qtype], network, err)
	}
	return r
}

func (f *fixture) try(network, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	r, _, err := (&dns.Client{Net: network, Timeout: time.Second}).Exchange(m, f.addr())
	return r, err
}

// values renders the answer section's data, sorted: "A 10.96.0.5", "SRV 0 100 80 web...".
func values(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		out = append(out, dns.TypeToString[rr.Header().Rrtype]+" "+strings.TrimPrefix(rr.String(), rr.Header().String()))
	}
	slices.Sort(out)
	return out
}

func (f *fixture) create(obj runtime.Object) runtime.Object {
	f.t.Helper()
	out, err := f.cp.Client.Create(ct.Ctx(f.t), obj)
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// waitAnswer polls the server (1 ms apart) until name's answer renders as want.
func (f *fixture) waitAnswer(name string, qtype uint16, want ...string) {
	f.t.Helper()
	slices.Sort(want)
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		// Errors are retried: a restarting server closes its socket and opens another.
		m, err := f.try("udp", name, qtype)
		if err == nil && m.Truncated { // as a resolver does
			m, err = f.try("tcp", name, qtype)
		}
		if err == nil {
			if got = values(m); slices.Equal(got, want) {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	f.t.Fatalf("%s %s: got %q, want %q", name, dns.TypeToString[qtype], got, want)
}

func service(name string, mutate func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metaNS(name, "default"), Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	if mutate != nil {
		mutate(s)
	}
	return s
}

func metaNS(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace}
}

type endpoint struct {
	ip, hostname string
	ready        bool
}

func slice(svc, name string, port int32, eps ...endpoint) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(port)}},
	}
	for _, e := range eps {
		ep := discoveryv1.Endpoint{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(e.ready)}}
		if e.hostname != "" {
			ep.Hostname = ptr.To(e.hostname)
		}
		es.Endpoints = append(es.Endpoints, ep)
	}
	return es
}

// fakeUpstream answers A queries for *.test. with 192.0.2.1 (nx.test.: NXDOMAIN) and counts them.
type fakeUpstream struct {
	addr    string
	queries atomic.Int32
}

func startUpstream(t *testing.T) *fakeUpstream {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &fakeUpstream{}
	u.addr = pc.LocalAddr().String()
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		u.queries.Add(1)
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		switch {
		case strings.EqualFold(q.Name, "nx.test."):
			m.Rcode = dns.RcodeNameError
			m.Ns = []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: "test.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 60}, Ns: "ns.test.", Mbox: "h.test.", Minttl: 60}}
		case q.Qtype == dns.TypeA:
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 1)}}
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return u
}

func kind(t *testing.T, group, resource string) *schemas.Kind {
	t.Helper()
	return controllerkit.MustKind(group, resource)
}
