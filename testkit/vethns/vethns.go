// Package vethns gives a test a node and a pod network namespace joined by a veth pair, as
// the CNI bridge plugin wires a pod (more pods and a bridge on request), so tc programs can
// be attached to the host side and see real packets. The namespaces (and with them the veth and any qdisc on it) are deleted
// when the test ends.
package vethns

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/internal/netnsexec"
	"github.com/skiff-sh/skiff/testkit/needs"
	"github.com/skiff-sh/skiff/testkit/tcpsink"
)

// Pair is the two namespaces; HostIf is the veth's node side, Index its ifindex there.
type Pair struct {
	Node, Pod         string // names under /run/netns
	HostIf            string
	Index             int
	NodeAddr, PodAddr netip.Addr
	pods              *atomic.Uint32 // pods of the node namespace so far, for Another
}

// New makes the pair: node side 10.250.0.1/30, pod side (eth0) 10.250.0.2/30, both up.
func New(t testing.TB) *Pair {
	t.Helper()
	if os.Geteuid() != 0 {
		needs.Skip(t, "network namespaces need root")
	}
	node := "skt-n-" + tag()
	ip(t, "netns", "add", node)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", node).Run() })
	return join(t, node, &atomic.Uint32{})
}

// Another is one more pod on p's node namespace, with its own veth and the next /30
// (10.250.n.0/30 for the node's n-th pod).
func (p *Pair) Another(t testing.TB) *Pair {
	t.Helper()
	return join(t, p.Node, p.pods)
}

func tag() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// join makes a pod namespace and its veth to node, up and addressed.
func join(t testing.TB, node string, pods *atomic.Uint32) *Pair {
	t.Helper()
	n := pods.Add(1) - 1
	if n > 255 {
		t.Fatal("vethns: more than 256 pods on one node namespace")
	}
	tag := tag()
	p := &Pair{Node: node, Pod: "skt-p-" + tag, HostIf: "veth" + tag, pods: pods,
		NodeAddr: netip.AddrFrom4([4]byte{10, 250, byte(n), 1}), PodAddr: netip.AddrFrom4([4]byte{10, 250, byte(n), 2})}
	ip(t, "netns", "add", p.Pod)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", p.Pod).Run() })
	ip(t, "-n", p.Node, "link", "add", p.HostIf, "type", "veth", "peer", "name", "eth0", "netns", p.Pod)
	ip(t, "-n", p.Node, "addr", "add", p.NodeAddr.String()+"/30", "dev", p.HostIf)
	ip(t, "-n", p.Node, "link", "set", p.HostIf, "up")
	ip(t, "-n", p.Pod, "addr", "add", p.PodAddr.String()+"/30", "dev", "eth0")
	ip(t, "-n", p.Pod, "link", "set", "eth0", "up")
	ip(t, "-n", p.Pod, "link", "set", "lo", "up")
	p.Do(t, p.Node, func() {
		ifc, err := net.InterfaceByName(p.HostIf)
		if err != nil {
			t.Fatal(err)
		}
		p.Index = ifc.Index
	})
	return p
}

// Enslave makes the node side a port of bridge br in the node namespace, as the CNI bridge
// plugin does, creating br (up) if it is not there.
func (p *Pair) Enslave(t testing.TB, br string) {
	t.Helper()
	if exec.Command("ip", "-n", p.Node, "link", "show", br).Run() != nil {
		ip(t, "-n", p.Node, "link", "add", br, "type", "bridge")
		ip(t, "-n", p.Node, "link", "set", br, "up")
	}
	ip(t, "-n", p.Node, "link", "set", p.HostIf, "master", br)
}

// Delete deletes the veth (both ends), as CNI DEL does.
func (p *Pair) Delete(t testing.TB) {
	t.Helper()
	ip(t, "-n", p.Node, "link", "del", p.HostIf)
}

func ip(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
}

// Do runs fn on a thread inside namespace ns: netlink calls, attaches, sockets it opens are
// that namespace's.
func (p *Pair) Do(t testing.TB, ns string, fn func()) {
	t.Helper()
	if err := netnsexec.Run("/run/netns/"+ns, fn); err != nil {
		t.Fatal(err)
	}
}

// Connect opens a TCP connection to addr from inside namespace ns and closes it: nil when a
// Sink (or any listener) accepted it, the dial's error when it was refused or dropped.
func (p *Pair) Connect(t testing.TB, ns, addr string) error {
	t.Helper()
	var err error
	p.Do(t, ns, func() {
		var c net.Conn
		if c, err = net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
		}
	})
	return err
}

// Sink listens on TCP addr inside namespace ns and accepts and closes every connection, so
// a test can tell a connect that went through from one that was dropped. It is closed when
// the test ends.
func (p *Pair) Sink(t testing.TB, ns, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	p.Do(t, ns, func() {
		var err error
		if ln, err = tcpsink.Listen(addr); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() { ln.Close() })
	return ln
}
