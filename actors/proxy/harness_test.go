package proxy

import (
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/testkit/cgrouptest"
)

// The client side runs in a child process (this test binary re-executed)
// placed at clone time into a cgroup2 child the proxy attaches to, and into
// a network namespace of its own with only loopback: backends live there on
// 127.0.0.x, and a ClusterIP that is not (yet) programmed has no route, so
// no packet ever leaves the machine.

const clientEnv = "SKIFF_PROXY_TEST_CLIENT"

func TestMain(m *testing.M) {
	if cgrouptest.IsClient(clientEnv) {
		if err := cgrouptest.LoopbackUp(); err != nil {
			fmt.Fprintln(os.Stderr, "client: lo up:", err)
			os.Exit(2)
		}
		c := &client{}
		cgrouptest.Serve(os.Stdin, os.Stdout, c.serve, func(err error) response { return response{Err: err.Error()} })
		return
	}
	os.Exit(m.Run())
}

type request struct {
	Op    string   // serve, tcpn, udpn, loopstart, loopcount, loopstop
	Addr  string   // VIP:port
	UDP   string   // loopstart: also one UDP exchange per round with this VIP:port
	Addrs []string // serve: backend IPs
	Port  int
	N     int
	Every time.Duration
}

// record is one round of the client loop.
type record struct {
	At      int64  // unix nanoseconds when connect() was called
	Backend string // who answered over TCP
	UDPFrom string `json:",omitempty"`
	Err     string `json:",omitempty"`
}

type response struct {
	Counts  map[string]int `json:",omitempty"`
	From    []string       `json:",omitempty"`
	Records []record       `json:",omitempty"`
	N       int            `json:",omitempty"`
	Err     string         `json:",omitempty"`
}

type client struct {
	mu      sync.Mutex
	records []record
	stop    atomic.Bool
	done    chan struct{}
}

func (c *client) serve(req request) response {
	switch req.Op {
	case "serve":
		for _, a := range req.Addrs {
			if err := backend(a, req.Port); err != nil {
				return response{Err: err.Error()}
			}
		}
		return response{}
	case "tcpn":
		counts := map[string]int{}
		for range req.N {
			name, err := tcpOnce(req.Addr)
			if err != nil {
				return response{Err: err.Error(), Counts: counts}
			}
			counts[name]++
		}
		return response{Counts: counts}
	case "udpn":
		counts := map[string]int{}
		var froms []string
		for range req.N {
			name, from, err := udpOnce(req.Addr)
			if err != nil {
				return response{Err: err.Error(), Counts: counts}
			}
			counts[name]++
			froms = append(froms, from)
		}
		return response{Counts: counts, From: froms}
	case "loopstart":
		c.stop.Store(false)
		c.done = make(chan struct{})
		go c.loop(req)
		return response{}
	case "loopcount":
		c.mu.Lock()
		defer c.mu.Unlock()
		return response{N: len(c.records)}
	case "loopstop":
		c.stop.Store(true)
		<-c.done
		c.mu.Lock()
		defer c.mu.Unlock()
		r := response{Records: c.records}
		c.records = nil
		return r
	}
	return response{Err: "unknown op " + req.Op}
}

func (c *client) loop(req request) {
	defer close(c.done)
	for !c.stop.Load() {
		r := record{At: time.Now().UnixNano()}
		name, err := tcpOnce(req.Addr)
		r.Backend = name
		if err == nil && req.UDP != "" {
			_, r.UDPFrom, err = udpOnce(req.UDP)
		}
		if err != nil {
			r.Err = err.Error()
		}
		c.mu.Lock()
		c.records = append(c.records, r)
		c.mu.Unlock()
		time.Sleep(req.Every) // pacing of the traffic, not synchronisation
	}
}

// backend answers every TCP connection and UDP datagram with its IP.
func backend(ip string, port int) error {
	addr := net.JoinHostPort(ip, fmt.Sprint(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	go cgrouptest.EchoTCP(ln, ip)
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	go cgrouptest.EchoUDP(pc, ip)
	return nil
}

func tcpOnce(addr string) (string, error) {
	name, _, err := cgrouptest.TCPOnce(addr, time.Second)
	return name, err
}

// udpOnce uses a fresh unconnected socket, so every call goes through the
// sendmsg hook and the reply through the recvmsg one.
func udpOnce(addr string) (name, from string, err error) {
	dst, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return "", "", err
	}
	c, err := net.ListenUDP("udp4", nil)
	if err != nil {
		return "", "", err
	}
	defer c.Close()
	if _, err := c.WriteToUDP([]byte("ping"), dst); err != nil {
		return "", "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 64)
	n, src, err := c.ReadFromUDP(buf)
	if err != nil {
		return "", "", err
	}
	return string(buf[:n]), src.String(), nil
}

// clientProc is the test's handle on the client process.
type clientProc struct {
	*cgrouptest.Client[request, response]
	t *testing.T
}

func needRoot(t *testing.T) {
	t.Helper()
	cgrouptest.NeedRoot(t, "for eBPF, cgroup2, bpffs and network namespaces")
}

func startClient(t *testing.T, cgroup string) *clientProc {
	t.Helper()
	c := cgrouptest.StartClient[request, response](t, cgroup, clientEnv, true)
	return &clientProc{Client: c, t: t}
}

func (c *clientProc) must(req request) response {
	c.t.Helper()
	r := c.Do(req)
	if r.Err != "" {
		c.t.Fatalf("client %s %s: %s", req.Op, req.Addr, r.Err)
	}
	return r
}
