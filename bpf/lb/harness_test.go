package lb

import (
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/testkit/cgrouptest"
)

// The client side of every test runs in a separate process placed into a
// child cgroup at clone time (CLONE_INTO_CGROUP, see cgrouptest), so the
// hooks never touch the test process itself.

const clientEnv = "SKIFF_LB_TEST_CLIENT"

func TestMain(m *testing.M) {
	if cgrouptest.IsClient(clientEnv) {
		socks := map[string]*net.UDPConn{}
		cgrouptest.Serve(os.Stdin, os.Stdout,
			func(req request) response { return serve(req, socks) },
			func(err error) response { return response{Err: err.Error()} })
		return
	}
	os.Exit(m.Run())
}

type request struct {
	Op   string // tcp, tcpn, udp, udpconn, close
	Addr string
	ID   string
	N    int
}

type response struct {
	Body   string         `json:",omitempty"`
	Peer   string         `json:",omitempty"` // getpeername / RemoteAddr
	From   string         `json:",omitempty"` // recvmsg source
	Counts map[string]int `json:",omitempty"`
	Err    string         `json:",omitempty"`
	Errno  int            `json:",omitempty"`
}

func fail(err error) response {
	r := response{Err: err.Error()}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		r.Errno = int(errno)
	}
	return r
}

func tcpOnce(addr string) (body, peer string, err error) {
	return cgrouptest.TCPOnce(addr, 2*time.Second)
}

func serve(req request, socks map[string]*net.UDPConn) response {
	switch req.Op {
	case "tcp":
		body, peer, err := tcpOnce(req.Addr)
		if err != nil {
			return fail(err)
		}
		return response{Body: body, Peer: peer}
	case "tcpn":
		counts := map[string]int{}
		for range req.N {
			body, _, err := tcpOnce(req.Addr)
			if err != nil {
				return fail(err)
			}
			counts[body]++
		}
		return response{Counts: counts}
	case "udp", "udpconn":
		c := socks[req.ID]
		if c == nil {
			dst, err := net.ResolveUDPAddr("udp", req.Addr)
			if err != nil {
				return fail(err)
			}
			if req.Op == "udp" {
				c, err = net.ListenUDP("udp4", nil)
			} else {
				c, err = net.DialUDP("udp", nil, dst)
			}
			if err != nil {
				return fail(err)
			}
			socks[req.ID] = c
		}
		var err error
		if req.Op == "udp" {
			var dst *net.UDPAddr
			if dst, err = net.ResolveUDPAddr("udp", req.Addr); err == nil {
				_, err = c.WriteToUDP([]byte("ping"), dst)
			}
		} else {
			_, err = c.Write([]byte("ping"))
		}
		if err != nil {
			return fail(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 256)
		n, from, err := c.ReadFromUDP(buf)
		if err != nil {
			return fail(err)
		}
		r := response{Body: string(buf[:n]), From: from.String()}
		if ra := c.RemoteAddr(); ra != nil {
			r.Peer = ra.String()
		}
		return r
	case "close":
		if c := socks[req.ID]; c != nil {
			c.Close()
			delete(socks, req.ID)
		}
		return response{}
	}
	return response{Err: "unknown op " + req.Op}
}

// env is one test's dataplane, cgroup and client process.
type env struct {
	t      *testing.T
	dp     *Dataplane
	cgroup string
	client *cgrouptest.Client[request, response]
}

func needRoot(t *testing.T) {
	t.Helper()
	cgrouptest.NeedRoot(t, "to load eBPF programs")
}

func loadOrSkip(t *testing.T, opts Options) *Dataplane {
	t.Helper()
	needRoot(t)
	dp, err := Load(opts)
	if err != nil {
		t.Skipf("kernel cannot load the socket LB programs: %v", err)
	}
	t.Cleanup(func() { dp.Close() })
	return dp
}

func cgroupChild(t *testing.T) string {
	t.Helper()
	return cgrouptest.Child(t, "skiff-lb-test")
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dp := loadOrSkip(t, Options{})
	child := cgroupChild(t)
	if err := dp.Attach(child); err != nil {
		t.Fatalf("attach: %v", err)
	}
	e := &env{t: t, dp: dp, cgroup: child}
	e.startClient()
	return e
}

func (e *env) startClient() {
	e.client = cgrouptest.StartClient[request, response](e.t, e.cgroup, clientEnv, false)
}

func (e *env) do(req request) response {
	e.t.Helper()
	return e.client.Do(req)
}

// must is do that fails the test on a client-side error.
func (e *env) must(req request) response {
	e.t.Helper()
	r := e.do(req)
	if r.Err != "" {
		e.t.Fatalf("%s %s: %s", req.Op, req.Addr, r.Err)
	}
	return r
}

// Backends answer every TCP connection and every datagram with their name.
func startTCP(t *testing.T, addr, name string) *net.TCPAddr {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go cgrouptest.EchoTCP(ln, name)
	return ln.Addr().(*net.TCPAddr)
}

func startUDP(t *testing.T, addr, name string) *net.UDPAddr {
	t.Helper()
	c, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go cgrouptest.EchoUDP(c, name)
	return c.LocalAddr().(*net.UDPAddr)
}
