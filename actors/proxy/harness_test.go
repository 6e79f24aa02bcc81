package proxy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The client side runs in a child process (this test binary re-executed)
// placed at clone time into a cgroup2 child the proxy attaches to, and into
// a network namespace of its own with only loopback: backends live there on
// 127.0.0.x, and a ClusterIP that is not (yet) programmed has no route, so
// no packet ever leaves the machine.

const clientEnv = "SKIFF_PROXY_TEST_CLIENT"

func TestMain(m *testing.M) {
	if os.Getenv(clientEnv) == "1" {
		if err := loopbackUp(); err != nil {
			fmt.Fprintln(os.Stderr, "client: lo up:", err)
			os.Exit(2)
		}
		runClient(os.Stdin, os.Stdout)
		return
	}
	os.Exit(m.Run())
}

func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
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

func runClient(in io.Reader, out io.Writer) {
	c := &client{}
	enc := json.NewEncoder(out)
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var req request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			_ = enc.Encode(response{Err: err.Error()})
			continue
		}
		_ = enc.Encode(c.serve(req))
	}
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
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, ip)
			c.Close()
		}
	}()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(ip), from)
		}
	}()
	return nil
}

func tcpOnce(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
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
	t     *testing.T
	enc   *json.Encoder
	dec   *json.Decoder
	netns string // /proc/<pid>/ns/net
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for eBPF, cgroup2, bpffs and network namespaces")
	}
}

// mountBPFFS mounts a private bpffs for the test's pins.
func mountBPFFS(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("bpf", dir, "bpf", 0, ""); err != nil {
		t.Skipf("cannot mount bpffs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return filepath.Join(dir, "node-a")
}

// cgroupChild makes a uniquely named cgroup2 child (other packages' tests
// use the same hierarchy at the same time).
func cgroupChild(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := unix.Mount("none", root, "cgroup2", 0, ""); err != nil {
		t.Skipf("cannot mount cgroup2: %v", err)
	}
	child := filepath.Join(root, fmt.Sprintf("skiff-proxy-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(child, 0o755); err != nil {
		unix.Unmount(root, 0)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Remove(child); err != nil {
			t.Errorf("remove cgroup: %v", err)
		}
		_ = unix.Unmount(root, unix.MNT_DETACH)
	})
	return child
}

func startClient(t *testing.T, cgroup string) *clientProc {
	t.Helper()
	dir, err := os.Open(cgroup)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), clientEnv+"=1")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(dir.Fd()), Cloneflags: syscall.CLONE_NEWNET}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start a process in a cgroup2 child and a new netns: %v", err)
	}
	t.Cleanup(func() {
		stdin.Close() // the client exits at EOF
		if err := cmd.Wait(); err != nil {
			t.Errorf("client: %v", err)
		}
	})
	return &clientProc{t: t, enc: json.NewEncoder(stdin), dec: json.NewDecoder(stdout), netns: fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid)}
}

func (c *clientProc) do(req request) response {
	c.t.Helper()
	if err := c.enc.Encode(req); err != nil {
		c.t.Fatalf("client: %v", err)
	}
	var r response
	if err := c.dec.Decode(&r); err != nil {
		c.t.Fatalf("client: %v", err)
	}
	return r
}

func (c *clientProc) must(req request) response {
	c.t.Helper()
	r := c.do(req)
	if r.Err != "" {
		c.t.Fatalf("client %s %s: %s", req.Op, req.Addr, r.Err)
	}
	return r
}
