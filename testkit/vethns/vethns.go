// Package vethns gives a test a node and a pod network namespace joined by a veth pair, as
// the CNI bridge plugin wires a pod, so tc programs can be attached to the host side and see
// real packets. Both namespaces (and with them the veth and any qdisc on it) are deleted
// when the test ends.
package vethns

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/skiff-sh/skiff/testkit/needs"
	"github.com/skiff-sh/skiff/testkit/tcpsink"
)

// Pair is the two namespaces; HostIf is the veth's node side, Index its ifindex there.
type Pair struct {
	Node, Pod         string // names under /run/netns
	HostIf            string
	Index             int
	NodeAddr, PodAddr netip.Addr
}

// New makes the pair: node side 10.250.0.1/30, pod side (eth0) 10.250.0.2/30, both up.
func New(t *testing.T) *Pair {
	t.Helper()
	if os.Geteuid() != 0 {
		needs.Skip(t, "network namespaces need root")
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	tag := hex.EncodeToString(b)
	p := &Pair{Node: "skt-n-" + tag, Pod: "skt-p-" + tag, HostIf: "veth" + tag,
		NodeAddr: netip.MustParseAddr("10.250.0.1"), PodAddr: netip.MustParseAddr("10.250.0.2")}
	for _, ns := range []string{p.Node, p.Pod} {
		ip(t, "netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	}
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

func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
}

// Do runs fn on a thread inside namespace ns: netlink calls, attaches, sockets it opens are
// that namespace's.
func (p *Pair) Do(t *testing.T, ns string, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer orig.Close()
	target, err := netns.GetFromName(ns)
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			panic("cannot return to the test's netns: " + err.Error()) // the thread stays locked and dies
		}
		runtime.UnlockOSThread()
	}()
	fn()
}

// Sink listens on TCP addr inside namespace ns and accepts and closes every connection, so
// a test can tell a connect that went through from one that was dropped. It is closed when
// the test ends.
func (p *Pair) Sink(t *testing.T, ns, addr string) net.Listener {
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
