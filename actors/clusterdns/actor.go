package clusterdns

import (
	"context"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/internal/resolvconf"
)

// Producer returns the actor producer to give to actorkit.System.Spawn.
func (s *Server) Producer() func() actorkit.Actor {
	return func() actorkit.Actor { return &dnsActor{s: s} }
}

type dnsActor struct {
	s    *Server
	z    *zone
	subs informer.Subscriptions // this incarnation's
}

// zone is one incarnation's answering state, shared with the server's goroutines.
type zone struct {
	idx  *index
	fwd  *forwarder
	node string
	// faultQuery is FaultQuery(node), made once rather than per query.
	faultQuery string
	log        func(msg string, args ...any)
	fail       func(reason any) // a panic while answering fails the actor

	warnOnce sync.Once
}

// synced tells an incarnation that the informers' first snapshots are in its mailbox.
type synced struct{ a *dnsActor }

// queryPanicked carries a panic from a query's goroutine into the actor; one from an earlier
// incarnation's zone (a query still answering when it stopped) is dropped.
type queryPanicked struct {
	z      *zone
	reason any
}

func (a *dnsActor) Receive(ctx actorkit.Context) {
	switch m := ctx.Message().(type) {
	case *informer.Event:
		if h, ok := a.subs.Handler(m); ok {
			actorkit.Fault(FaultEvent(a.s.cfg.NodeName))
			m.To(h)
		}
	case *actorkit.Started:
		a.start(ctx)
	case *synced:
		if m.a == a {
			sys, self := actorkit.SystemOf(ctx), ctx.Self()
			actorkit.Go(ctx, "clusterdns udp", func(c context.Context) { a.serve(c, sys, self) })
		}
	case *queryPanicked:
		if m.z == a.z {
			panic(fmt.Sprintf("clusterdns: query: %v", m.reason))
		}
	case *actorkit.Restarting, *actorkit.Stopping:
		a.stop()
	}
}

func (a *dnsActor) start(actx actorkit.Context) {
	s := a.s
	upstreams := s.cfg.Upstreams
	if upstreams == nil {
		host, err := resolvconf.Host(s.cfg.ResolvConf)
		if err != nil {
			s.cfg.Logger.Warn("cluster dns: reading the node's resolvers", "file", s.cfg.ResolvConf, "err", err)
		}
		upstreams = resolvconf.NonLoopback(host.Nameservers)
	}
	sys, self := actorkit.SystemOf(actx), actx.Self()
	z := &zone{idx: newIndex(s.Zone()), fwd: newForwarder(upstreams), node: s.cfg.NodeName,
		faultQuery: FaultQuery(s.cfg.NodeName), log: s.cfg.Logger.Warn}
	z.fail = func(r any) { sys.Send(self, &queryPanicked{z: z, reason: r}) }
	a.z = z
	for inf, h := range s.handlers {
		a.subs.Add(sys, self, inf, h(a.z))
	}
	// Every cached object was replayed into the mailbox by the subscriptions above, and an
	// informer delivers its first snapshot before it reports synced: once both have, the
	// marker sent here follows every event of the snapshots.
	actorkit.Go(actx, "clusterdns sync", func(ctx context.Context) {
		if s.WaitForSync(ctx) {
			sys.Send(self, &synced{a: a})
		}
	})
}

// serve binds the UDP socket, then TCP on the same port, retrying with back-off while the
// address is taken (a node keeps running its pods without cluster DNS rather than stop), and
// serves both until the incarnation ends, which closes them.
func (a *dnsActor) serve(ctx context.Context, sys *actorkit.System, self *actorkit.PID) {
	var pc net.PacketConn
	var ln net.Listener
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 10*time.Second) {
		var err error
		if pc, ln, err = bind(ctx, a.s.cfg.Listen); err == nil {
			break
		}
		a.s.cfg.Logger.Error("cluster dns: cannot listen; retrying", "node", a.s.cfg.NodeName, "err", err, "after", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
	context.AfterFunc(ctx, func() { _ = pc.Close(); _ = ln.Close() })
	addr := pc.LocalAddr().String()
	sys.GoFrom(self, "clusterdns tcp", func(ctx context.Context) {
		if err := (&dns.Server{Listener: ln, Handler: a.z}).ActivateAndServe(); err != nil && ctx.Err() == nil {
			panic(fmt.Sprintf("cluster dns: serving tcp %s: %v", addr, err))
		}
	})
	if ctx.Err() == nil { // not after stop has cleared it
		a.s.setAddr(addr)
	}
	a.s.cfg.Logger.Info("cluster dns serving", "node", a.s.cfg.NodeName, "addr", addr, "zone", a.z.idx.zone, "upstreams", a.z.fwd.upstreams)
	if err := (&dns.Server{PacketConn: pc, Handler: a.z}).ActivateAndServe(); err != nil && ctx.Err() == nil {
		panic(fmt.Sprintf("cluster dns: serving udp %s: %v", addr, err))
	}
}

func bind(ctx context.Context, listen string) (net.PacketConn, net.Listener, error) {
	lc := net.ListenConfig{Control: freebind}
	pc, err := lc.ListenPacket(ctx, "udp", listen)
	if err != nil {
		return nil, nil, fmt.Errorf("listen udp %s: %w", listen, err)
	}
	ln, err := lc.Listen(ctx, "tcp", pc.LocalAddr().String())
	if err != nil {
		_ = pc.Close()
		return nil, nil, fmt.Errorf("listen tcp %s: %w", pc.LocalAddr(), err)
	}
	return pc, ln, nil
}

// stop ends the incarnation's subscriptions; ending its goroutines closes the sockets.
func (a *dnsActor) stop() {
	a.subs.Stop()
	a.s.setAddr("")
}

// freebind lets the server bind the node bridge's address before the bridge has it.
func freebind(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_FREEBIND, 1)
	})
	if err != nil {
		return err
	}
	return serr
}

// ServeDNS answers one query; it runs on the DNS server's goroutines.
func (z *zone) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	defer func() {
		if r := recover(); r != nil {
			z.fail(r)
			m := new(dns.Msg)
			_ = w.WriteMsg(m.SetRcode(req, dns.RcodeServerFailure))
		}
	}()
	actorkit.Fault(z.faultQuery)
	m := z.answer(context.Background(), req)
	_, udp := w.RemoteAddr().(*net.UDPAddr)
	fit(req, m, udp)
	// Packed into a pooled buffer: WriteMsg would allocate one per query.
	buf := packBufs.Get().(*[]byte)
	defer packBufs.Put(buf)
	out, err := m.PackBuffer(*buf)
	if err != nil {
		_ = w.WriteMsg(new(dns.Msg).SetRcode(req, dns.RcodeServerFailure))
		return
	}
	_, _ = w.Write(out)
}

// packBufs hold room for a UDP answer with EDNS0 (a larger TCP one gets its own).
var packBufs = sync.Pool{New: func() any { b := make([]byte, dns.DefaultMsgSize); return &b }}

// warnUpstream logs the first failure to forward of this incarnation (a node without an
// upstream fails every outside name the same way).
func (z *zone) warnUpstream(err error) {
	z.warnOnce.Do(func() {
		z.log("cluster dns: forwarding failed (further failures not logged)", "node", z.node, "err", err)
	})
}
