package lb

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The client side of every test runs in a separate process placed into a
// child cgroup at clone time (CLONE_INTO_CGROUP), so the hooks never touch
// the test process itself. It is the test binary re-executed in client mode,
// driven by one JSON request per line on stdin.

const clientEnv = "SKIFF_LB_TEST_CLIENT"

func TestMain(m *testing.M) {
	if os.Getenv(clientEnv) == "1" {
		runClient(os.Stdin, os.Stdout)
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

func runClient(in io.Reader, out io.Writer) {
	socks := map[string]*net.UDPConn{}
	enc := json.NewEncoder(out)
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var req request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			_ = enc.Encode(response{Err: err.Error()})
			continue
		}
		_ = enc.Encode(serve(req, socks))
	}
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
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), c.RemoteAddr().String(), err
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
	enc    *json.Encoder
	dec    *json.Decoder
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to load eBPF programs")
	}
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

// mountCgroup2 mounts a private cgroup2 hierarchy and creates a child in it.
func mountCgroup2(t *testing.T) (root, child string) {
	t.Helper()
	root = t.TempDir()
	if err := unix.Mount("none", root, "cgroup2", 0, ""); err != nil {
		t.Skipf("cannot mount cgroup2: %v", err)
	}
	child = filepath.Join(root, "skiff-lb-test")
	if err := os.Mkdir(child, 0o755); err != nil {
		unix.Unmount(root, 0)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// rmdir succeeds once the client process is gone; it is reaped
		// by an earlier cleanup, so this never waits on anything else.
		if err := os.Remove(child); err != nil {
			t.Errorf("remove cgroup: %v", err)
		}
		if err := unix.Unmount(root, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount cgroup2: %v", err)
		}
	})
	return root, child
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dp := loadOrSkip(t, Options{})
	_, child := mountCgroup2(t)
	if err := dp.Attach(child); err != nil {
		t.Fatalf("attach: %v", err)
	}
	e := &env{t: t, dp: dp, cgroup: child}
	e.startClient()
	return e
}

func (e *env) startClient() {
	t := e.t
	dir, err := os.Open(e.cgroup)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), clientEnv+"=1")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(dir.Fd())}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start a process in a cgroup2 child: %v", err)
	}
	t.Cleanup(func() {
		stdin.Close() // the client exits at EOF
		if err := cmd.Wait(); err != nil {
			t.Errorf("client: %v", err)
		}
	})
	e.enc = json.NewEncoder(stdin)
	e.dec = json.NewDecoder(stdout)
}

func (e *env) do(req request) response {
	e.t.Helper()
	if err := e.enc.Encode(req); err != nil {
		e.t.Fatalf("client: %v", err)
	}
	var r response
	if err := e.dec.Decode(&r); err != nil {
		e.t.Fatalf("client: %v", err)
	}
	return r
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
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, name)
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr)
}

func startUDP(t *testing.T, addr, name string) *net.UDPAddr {
	t.Helper()
	c, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 256)
		for {
			_, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = c.WriteTo([]byte(name), from)
		}
	}()
	return c.LocalAddr().(*net.UDPAddr)
}
