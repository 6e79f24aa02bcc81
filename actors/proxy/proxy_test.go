package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/testkit/needs"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/bpf/lb"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/bpffstest"
	"github.com/skiff-sh/skiff/testkit/cgrouptest"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

const backendPort = 8080

type env struct {
	t      *testing.T
	cp     *controlplane.ControlPlane
	pin    string
	cgroup string
	client *clientProc
	n      int
	// informers the next proxy reads; nil = the control plane's (synced long ago)
	informers *informer.Factory
	nodeIPs   []netip.Addr // the next proxy's Config.NodeIPs
}

func newEnv(t *testing.T) *env {
	t.Helper()
	needRoot(t)
	pin := bpffstest.PinDir(t)
	probe, err := lb.Load(lb.Options{})
	if err != nil {
		needs.Skipf(t, "kernel cannot load the socket LB programs: %v", err)
	}
	probe.Close()
	cg := cgrouptest.Child(t, "skiff-proxy-test")
	e := &env{t: t, pin: pin, cgroup: cg}
	e.client = startClient(t, cg)
	e.cp = testutil.StartControlPlane(t)
	// Pins outlive the processes: remove what a failed test left.
	t.Cleanup(func() { _ = os.RemoveAll(pin) })
	return e
}

type running struct {
	p       *Proxy
	pid     *actorkit.PID
	stopped bool
}

func (e *env) stop(r *running) {
	e.cp.Actors.Stop(r.pid)
	r.stopped = true
}

func (e *env) startProxy(cleanup bool) *running {
	e.t.Helper()
	e.n++
	informers := e.informers
	if informers == nil {
		informers = e.cp.Informers
	}
	p := New(Config{
		Log: e.cp.Log, Informers: informers, NodeName: "node-a", Cgroups: []string{e.cgroup}, PinDir: e.pin, Cleanup: cleanup,
		Netns:   func() []string { return []string{e.client.Netns} },
		NodeIPs: e.nodeIPs,
		Maps:    lb.Options{MaxServices: 4096, MaxBackends: 16384, AffinityEntries: 4096, SocketEntries: 4096},
	})
	pid, err := e.cp.Actors.Spawn(fmt.Sprintf("proxy-%d", e.n), p.Producer())
	if err != nil {
		e.t.Fatal(err)
	}
	r := &running{p: p, pid: pid}
	e.t.Cleanup(func() {
		if !r.stopped {
			e.cp.Actors.Stop(pid)
		}
	})
	testutil.Eventually(e.t, 20*time.Second, 5*time.Millisecond, func() error {
		if !p.Synced() {
			return fmt.Errorf("proxy not synced")
		}
		return nil
	})
	return r
}

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

// service creates a Service with TCP port 80 and UDP port 53, both to
// backendPort, and returns its ClusterIP.
func (e *env) service(name string, affinity bool) netip.Addr {
	e.t.Helper()
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
		}},
	}
	if affinity {
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
	}
	out, err := e.cp.Client.Create(e.ctx(), s)
	if err != nil {
		e.t.Fatalf("create service %s: %v", name, err)
	}
	ip, err := netip.ParseAddr(out.(*corev1.Service).Spec.ClusterIP)
	if err != nil {
		e.t.Fatalf("service %s got no ClusterIP: %v", name, err)
	}
	return ip
}

// endpoints describes a slice's endpoints: IP -> ready.
type endpoints map[string]bool

func sliceFor(svc string, eps endpoints) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: svc + "-abcde", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("http"), Port: ptr.To[int32](backendPort), Protocol: ptr.To(corev1.ProtocolTCP)},
			{Name: ptr.To("dns"), Port: ptr.To[int32](backendPort), Protocol: ptr.To(corev1.ProtocolUDP)},
		},
	}
	ips := make([]string, 0, len(eps))
	for ip := range eps {
		ips = append(ips, ip)
	}
	slices.Sort(ips)
	for _, ip := range ips {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(eps[ip])},
		})
	}
	return es
}

func (e *env) createSlice(svc string, eps endpoints) *discoveryv1.EndpointSlice {
	e.t.Helper()
	out, err := e.cp.Client.Create(e.ctx(), sliceFor(svc, eps))
	if err != nil {
		e.t.Fatalf("create slice for %s: %v", svc, err)
	}
	return out.(*discoveryv1.EndpointSlice)
}

// updateSlice rewrites the endpoints of a slice created before.
func (e *env) updateSlice(cur *discoveryv1.EndpointSlice, eps endpoints) *discoveryv1.EndpointSlice {
	e.t.Helper()
	next := sliceFor(cur.Labels[discoveryv1.LabelServiceName], eps)
	next.ResourceVersion = cur.ResourceVersion
	out, err := e.cp.Client.Update(e.ctx(), next)
	if err != nil {
		e.t.Fatalf("update slice %s: %v", cur.Name, err)
	}
	return out.(*discoveryv1.EndpointSlice)
}

// waitProgrammed polls the kernel maps until ports Service ports have backends each.
func waitProgrammed(t *testing.T, p *Proxy, ports, backends int) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, 10*time.Millisecond, func() error {
		ds, err := p.Dump()
		if err != nil {
			return err
		}
		done := 0
		for _, d := range ds {
			if ours(d.Key) && len(d.Backends) == backends {
				done++
			}
		}
		if done != ports {
			return fmt.Errorf("%d of %d Service ports programmed with %d backends", done, ports, backends)
		}
		return nil
	})
}

// waitBackends polls the kernel maps until key serves exactly want.
func waitBackends(t *testing.T, p *Proxy, key lb.ServiceKey, want ...string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, 2*time.Millisecond, func() error {
		return hasBackends(p, key, want...)
	})
}

func hasBackends(p *Proxy, key lb.ServiceKey, want ...string) error {
	ds, err := p.Dump()
	if err != nil {
		return err
	}
	for _, d := range ds {
		if d.Key != key {
			continue
		}
		var got []string
		for _, b := range d.Backends {
			got = append(got, b.Addr.String())
		}
		if slices.Equal(got, want) {
			return nil
		}
		return fmt.Errorf("%v serves %v, want %v", key, got, want)
	}
	return fmt.Errorf("%v not programmed", key)
}

// ours tells the test's Service ports (80/TCP, 53/UDP) from the control
// plane's own kubernetes (443/TCP) and kube-dns (10.96.0.10:53) Services,
// which every proxy also programs.
func ours(k lb.ServiceKey) bool {
	return (k.Port == 80 || k.Port == 53) && k.VIP != netip.MustParseAddr("10.96.0.10")
}

func tcpKey(ip netip.Addr) lb.ServiceKey { return lb.ServiceKey{VIP: ip, Port: 80, Proto: lb.TCP} }
func udpKey(ip netip.Addr) lb.ServiceKey { return lb.ServiceKey{VIP: ip, Port: 53, Proto: lb.UDP} }

func TestTCPAndUDPReachClusterIPAndSpread(t *testing.T) {
	e := newEnv(t)
	ips := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	e.client.must(request{Op: "serve", Addrs: ips, Port: backendPort})
	p := e.startProxy(false).p
	vip := e.service("web", false)
	e.createSlice("web", endpoints{ips[0]: true, ips[1]: true, ips[2]: true})
	waitBackends(t, p, tcpKey(vip), ips...)
	waitBackends(t, p, udpKey(vip), ips...)

	tcp := e.client.must(request{Op: "tcpn", Addr: netip.AddrPortFrom(vip, 80).String(), N: 300}).Counts
	udp := e.client.must(request{Op: "udpn", Addr: netip.AddrPortFrom(vip, 53).String(), N: 300})
	for _, ip := range ips {
		if tcp[ip] == 0 || udp.Counts[ip] == 0 {
			t.Errorf("backend %s unused: tcp %v udp %v", ip, tcp, udp.Counts)
		}
	}
	for _, from := range udp.From {
		if from != netip.AddrPortFrom(vip, 53).String() {
			t.Fatalf("UDP reply came from %s, want the ClusterIP", from)
		}
	}
	t.Logf("300 TCP connections: %v; 300 UDP exchanges: %v", tcp, udp.Counts)
}

func TestAffinityPinsClient(t *testing.T) {
	e := newEnv(t)
	ips := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	e.client.must(request{Op: "serve", Addrs: ips, Port: backendPort})
	p := e.startProxy(false).p
	vip := e.service("sticky", true)
	e.createSlice("sticky", endpoints{ips[0]: true, ips[1]: true, ips[2]: true})
	waitBackends(t, p, tcpKey(vip), ips...)
	ds, _ := p.Dump()
	for _, d := range ds {
		if d.Key.VIP == vip && d.AffinityTimeout != 60*time.Second {
			t.Errorf("%v affinity %v, want 60s", d.Key, d.AffinityTimeout)
		}
	}
	counts := e.client.must(request{Op: "tcpn", Addr: netip.AddrPortFrom(vip, 80).String(), N: 50}).Counts
	if len(counts) != 1 {
		t.Fatalf("ClientIP affinity spread one client over %v", counts)
	}
}

func TestNotReadyEndpointStopsReceivingNewConnections(t *testing.T) {
	e := newEnv(t)
	ips := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	e.client.must(request{Op: "serve", Addrs: ips, Port: backendPort})
	p := e.startProxy(false).p
	vip := e.service("web", false)
	es := e.createSlice("web", endpoints{ips[0]: true, ips[1]: true, ips[2]: true})
	waitBackends(t, p, tcpKey(vip), ips...)

	e.client.must(request{Op: "loopstart", Addr: netip.AddrPortFrom(vip, 80).String(), Every: time.Millisecond})
	waitLoop(t, e.client, 100)
	t0 := time.Now()
	e.updateSlice(es, endpoints{ips[0]: false, ips[1]: true, ips[2]: true})
	tWritten := time.Now()
	waitBackends(t, p, tcpKey(vip), ips[1:]...)
	tProgrammed := time.Now()
	n := e.client.must(request{Op: "loopcount"}).N
	waitLoop(t, e.client, n+200)
	recs := e.client.must(request{Op: "loopstop"}).Records

	var last time.Time
	var after, errs int
	for _, r := range recs {
		at := time.Unix(0, r.At)
		if r.Err != "" {
			errs++
			t.Errorf("connection at %v failed: %s", at.Sub(t0), r.Err)
		}
		if r.Backend == ips[0] && at.After(t0) {
			last = at
		}
		if at.After(tProgrammed) {
			after++
			if r.Backend == ips[0] {
				t.Errorf("not-ready backend got a new connection %v after the maps changed", at.Sub(tProgrammed))
			}
		}
	}
	stop := tProgrammed.Sub(t0)
	if !last.IsZero() {
		stop = last.Sub(t0)
	}
	t.Logf("ready=false: API write took %v; maps changed %v after the write began; last new connection to the not-ready backend %v after (bounded by the map change when none came after the write); %d connections after the change, %d errors of %d",
		tWritten.Sub(t0), tProgrammed.Sub(t0), stop, after, errs, len(recs))
	if tProgrammed.Sub(t0) > time.Second {
		t.Errorf("the not-ready endpoint was still programmed %v after the API write began (want < 1s)", tProgrammed.Sub(t0))
	}
}

func waitLoop(t *testing.T, c *clientProc, n int) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, 2*time.Millisecond, func() error {
		if got := c.must(request{Op: "loopcount"}).N; got < n {
			return fmt.Errorf("client loop made %d connections, want %d", got, n)
		}
		return nil
	})
}

// A change to one Service of 1,000 rewrites only that Service's entries, and
// a restarted proxy rewrites nothing that did not change while it was down.
func TestOneChangeAmongThousandServicesTouchesOnlyIt(t *testing.T) {
	e := newEnv(t)
	const n = 1000
	r := e.startProxy(false)
	vips := make([]netip.Addr, n)
	sls := make([]*discoveryv1.EndpointSlice, n)
	start := time.Now()
	for i := range n {
		name := fmt.Sprintf("s%04d", i)
		vips[i] = e.service(name, false)
		sls[i] = e.createSlice(name, endpoints{fmt.Sprintf("127.0.1.%d", i%250+1): true})
	}
	created := time.Since(start)
	waitProgrammed(t, r.p, 2*n, 1)
	t.Logf("%d services + slices created through the API in %v; all %d ports programmed %v after the first create", n, created, 2*n, time.Since(start))

	before := r.p.Stats()
	sls[500] = e.updateSlice(sls[500], endpoints{"127.0.2.1": true})
	waitBackends(t, r.p, tcpKey(vips[500]), "127.0.2.1")
	waitBackends(t, r.p, udpKey(vips[500]), "127.0.2.1")
	// A second change is the barrier: anything the first set off is done.
	sls[7] = e.updateSlice(sls[7], endpoints{"127.0.2.2": true})
	waitBackends(t, r.p, udpKey(vips[7]), "127.0.2.2")
	waitBackends(t, r.p, tcpKey(vips[7]), "127.0.2.2")
	d := diffStats(r.p.Stats(), before)
	// Per changed port: 1 service entry, 1 slot + 1 member written, 1 slot + 1 member deleted.
	want := Stats{Stats: lb.Stats{ServiceWrites: 4, BackendWrites: 8, BackendDeletes: 8}, Upserts: 4}
	if d != want {
		t.Fatalf("two changed Services (4 ports) of %d cost %+v, want %+v", n, d, want)
	}

	// Restart with nothing changed: the resync against Dump writes nothing.
	e.stop(r)
	r2 := e.startProxy(false)
	if st := r2.p.Stats(); st != (Stats{Syncs: 1}) {
		t.Fatalf("resync after a restart with nothing changed: %+v", st)
	}
	// Changed while down: one Service deleted, one slice changed.
	e.stop(r2)
	svcKind, _ := schemas.ByResource("", "v1", "services")
	if err := e.cp.Client.Delete(e.ctx(), svcKind, "default", "s0001", nil); err != nil {
		t.Fatal(err)
	}
	e.updateSlice(sls[2], endpoints{"127.0.2.3": true})
	r3 := e.startProxy(false)
	want = Stats{Stats: lb.Stats{ServiceWrites: 2, BackendWrites: 4, BackendDeletes: 4}, Upserts: 2, Deletes: 2, Syncs: 1}
	if st := r3.p.Stats(); st != want {
		t.Fatalf("resync after a restart that missed a delete and a change: %+v, want %+v", st, want)
	}
	if err := hasBackends(r3.p, tcpKey(vips[1])); err == nil || !strings.Contains(err.Error(), "not programmed") {
		t.Fatalf("deleted Service still programmed: %v", err)
	}
	waitBackends(t, r3.p, tcpKey(vips[2]), "127.0.2.3")
}

func diffStats(a, b Stats) Stats {
	return Stats{
		Stats:   lb.Stats{ServiceWrites: a.ServiceWrites - b.ServiceWrites, BackendWrites: a.BackendWrites - b.BackendWrites, BackendDeletes: a.BackendDeletes - b.BackendDeletes},
		Upserts: a.Upserts - b.Upserts, Deletes: a.Deletes - b.Deletes, Syncs: a.Syncs - b.Syncs,
	}
}

// A panic in the proxy's event handler restarts the proxy actor (the process lives), the
// Services it programmed keep answering meanwhile, and a change made around the crash still
// reaches the maps.
func TestAPanicInTheEventHandlerRestartsTheProxy(t *testing.T) {
	e := newEnv(t)
	ips := []string{"127.0.0.2", "127.0.0.3"}
	e.client.must(request{Op: "serve", Addrs: ips, Port: backendPort})
	r := e.startProxy(false)
	vip := e.service("web", false)
	slice := e.createSlice("web", endpoints{ips[0]: true})
	waitBackends(t, r.p, tcpKey(vip), ips[0])

	actorkit.InjectPanic(FaultEvent("node-a"), 1)
	e.updateSlice(slice, endpoints{ips[0]: true, ips[1]: true})
	testutil.Eventually(t, 20*time.Second, 5*time.Millisecond, func() error {
		if n := e.cp.Actors.Health().Restarts(r.pid.Id); n != 1 {
			return fmt.Errorf("proxy restarted %d times, want 1", n)
		}
		return nil
	})
	waitBackends(t, r.p, tcpKey(vip), ips...)
	counts := e.client.must(request{Op: "tcpn", Addr: netip.AddrPortFrom(vip, 80).String(), N: 100}).Counts
	if counts[ips[0]] == 0 || counts[ips[1]] == 0 {
		t.Fatalf("after the restart both backends must answer: %v", counts)
	}
}
