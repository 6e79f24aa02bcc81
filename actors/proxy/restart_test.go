package proxy

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/informer"
)

// A client connecting every few milliseconds over TCP and UDP sees no
// failure while the proxy actor crashes and restarts, and while it is
// stopped and a new proxy (new informers, new programs) adopts the pins.
// Cleanup: true then takes everything out of the kernel.
func TestRestartKeepsConnectionsWorking(t *testing.T) {
	e := newEnv(t)
	ips := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	e.client.must(request{Op: "serve", Addrs: ips, Port: backendPort})
	r := e.startProxy(false)
	vip := e.service("web", false)
	es := e.createSlice("web", endpoints{ips[0]: true, ips[1]: true, ips[2]: true})
	waitBackends(t, r.p, tcpKey(vip), ips...)
	waitBackends(t, r.p, udpKey(vip), ips...)

	e.client.must(request{Op: "loopstart", Addr: netip.AddrPortFrom(vip, 80).String(), UDP: netip.AddrPortFrom(vip, 53).String(), Every: 2 * time.Millisecond})
	waitLoop(t, e.client, 50)

	// 1. Crash: the supervisor restarts the actor; it reloads and adopts.
	before := r.p.Stats()
	e.cp.Actors.Send(r.pid, &actorkit.Crash{})
	waitSyncs(t, r.p, before.Syncs+1)
	if d := diffStats(r.p.Stats(), before); d != (Stats{Syncs: 1}) {
		t.Errorf("restart after a crash rewrote entries: %+v", d)
	}
	waitLoop(t, e.client, e.client.must(request{Op: "loopcount"}).N+50)

	// 2. Stop (no cleanup) and a brand-new proxy, as an agent restart does.
	e.stop(r)
	waitLoop(t, e.client, e.client.must(request{Op: "loopcount"}).N+50) // nothing runs now but the pins
	r2 := e.startProxy(true)
	if st := r2.p.Stats(); st != (Stats{Syncs: 1}) {
		t.Errorf("a new proxy over the pinned maps rewrote entries: %+v", st)
	}
	// The new proxy follows changes.
	e.updateSlice(es, endpoints{ips[0]: true, ips[1]: true})
	waitBackends(t, r2.p, tcpKey(vip), ips[:2]...)
	waitBackends(t, r2.p, udpKey(vip), ips[:2]...)
	waitLoop(t, e.client, e.client.must(request{Op: "loopcount"}).N+50)

	recs := e.client.must(request{Op: "loopstop"}).Records
	failed := 0
	for _, rec := range recs {
		if rec.Err != "" || rec.UDPFrom != netip.AddrPortFrom(vip, 53).String() {
			failed++
			if failed < 5 {
				t.Errorf("round at %v: backend %q udp from %q err %q", time.Unix(0, rec.At).Format(time.StampMicro), rec.Backend, rec.UDPFrom, rec.Err)
			}
		}
	}
	span := time.Duration(recs[len(recs)-1].At - recs[0].At)
	t.Logf("%d TCP+UDP rounds over %v across a crash-restart and a stop/start: %d failed", len(recs), span.Round(time.Millisecond), failed)

	// 3. Stop with Cleanup: pins gone, and the VIP is no longer routed
	// (the client's namespace has no route for it: unreachable, no packet sent).
	e.stop(r2)
	if _, err := os.Stat(e.pin); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pins after a Cleanup stop: %v", err)
	}
	resp := e.client.Do(request{Op: "tcpn", Addr: netip.AddrPortFrom(vip, 80).String(), N: 1})
	if !strings.Contains(resp.Err, "unreachable") {
		t.Fatalf("after cleanup a connect to the ClusterIP gave %+v, want network unreachable", resp)
	}
}

func waitSyncs(t *testing.T, p *Proxy, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for p.Stats().Syncs < n || !p.Synced() {
		if time.Now().After(deadline) {
			t.Fatalf("proxy did not resync %d times: %+v", n, p.Stats())
		}
		time.Sleep(2 * time.Millisecond) // polling with a deadline
	}
}

// A brand-new proxy whose informers start syncing only now (a restarted process) leaves the
// pinned maps as they are: its first resync waits for its caches, Service -> slices index
// included, so it neither shrinks nor rewrites a Service's backends.
func TestNewProcessProxyKeepsMapsUntilSynced(t *testing.T) {
	e := newEnv(t)
	r := e.startProxy(false)
	const services = 100
	for i := range services {
		name := fmt.Sprintf("svc-%d", i)
		e.service(name, false)
		e.createSlice(name, endpoints{"127.0.0.2": true, "127.0.0.3": true})
	}
	waitProgrammed(t, r.p, 2*services, 2)
	e.stop(r)

	// A process restart: new informers over the same log, syncing while the proxy starts.
	e.informers = informer.NewFactory(e.cp.Log)
	pid, err := e.cp.Actors.Spawn("informers-2", e.informers.Actor())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.cp.Actors.Stop(pid) })
	r2 := e.startProxy(false)
	if st := r2.p.Stats(); st != (Stats{Syncs: 1}) {
		t.Fatalf("a new proxy on syncing informers changed the pinned maps: %+v", st)
	}
}
