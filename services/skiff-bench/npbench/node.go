package npbench

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/bpf/policy"
	"github.com/skiff-sh/skiff/services/skiff-bench/benchutil"
	"github.com/skiff-sh/skiff/testkit/tcpsink"
)

// node is a private node namespace with a bridge and two pod namespaces on it, each veth's
// host side a bridge port, plus a private bpffs for the maps.
type node struct {
	names          []string // namespaces to delete
	nodeNS         string
	server, client *benchutil.NSThread
	bpffs          string
}

func newNode() (*node, error) {
	tag := strconv.Itoa(os.Getpid())
	n := &node{nodeNS: "npb-node-" + tag}
	steps := [][]string{
		{"netns", "add", n.nodeNS},
		{"-n", n.nodeNS, "link", "add", "br0", "type", "bridge"},
		{"-n", n.nodeNS, "addr", "add", "10.77.0.1/24", "dev", "br0"},
		{"-n", n.nodeNS, "link", "set", "br0", "up"},
	}
	n.names = append(n.names, n.nodeNS)
	for _, p := range []struct {
		name string
		ip   netip.Addr
	}{{"npb-srv-" + tag, server}, {"npb-cli-" + tag, client}} {
		host := "veth" + p.ip.String()[len("10.77.0."):]
		n.names = append(n.names, p.name)
		steps = append(steps,
			[]string{"netns", "add", p.name},
			[]string{"-n", n.nodeNS, "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", p.name},
			[]string{"-n", n.nodeNS, "link", "set", host, "master", "br0", "up"},
			[]string{"-n", p.name, "addr", "add", p.ip.String() + "/24", "dev", "eth0"},
			[]string{"-n", p.name, "link", "set", "eth0", "up"},
			[]string{"-n", p.name, "link", "set", "lo", "up"},
		)
	}
	for _, s := range steps {
		if err := benchutil.Run("ip", s...); err != nil {
			n.close()
			return nil, err
		}
	}
	var err error
	if n.bpffs, err = os.MkdirTemp("", "npbench-bpffs"); err == nil {
		err = unix.Mount("bpf", n.bpffs, "bpf", 0, "")
	}
	if err == nil {
		n.server, err = enter(n.names[1])
	}
	if err == nil {
		n.client, err = enter(n.names[2])
	}
	if err != nil {
		n.close()
		return nil, err
	}
	return n, nil
}

// attach puts the programs on both bridge ports (the node namespace resolves their indexes).
func (n *node) attach(dp *policy.Dataplane) error {
	t, err := enter(n.nodeNS)
	if err != nil {
		return err
	}
	defer t.Close()
	return t.Do(func() error {
		for _, name := range []string{"veth2", "veth3"} {
			ifc, err := net.InterfaceByName(name)
			if err != nil {
				return err
			}
			if _, err := dp.Attach(ifc.Index); err != nil {
				return err
			}
		}
		return nil
	})
}

// serve accepts and drops connections at addr in the server pod.
func (n *node) serve(addr netip.AddrPort) error {
	return n.server.Do(func() error {
		_, err := tcpsink.Listen(addr.String())
		return err
	})
}

func (n *node) close() {
	for _, t := range []*benchutil.NSThread{n.server, n.client} {
		if t != nil {
			t.Close()
		}
	}
	if n.bpffs != "" {
		_ = unix.Unmount(n.bpffs, unix.MNT_DETACH)
		_ = os.Remove(n.bpffs)
	}
	for _, name := range n.names {
		_ = exec.Command("ip", "netns", "del", name).Run()
	}
}

// enter starts a thread inside the named namespace.
func enter(name string) (*benchutil.NSThread, error) {
	t, err := benchutil.NewNSThread(func() error {
		h, err := netns.GetFromName(name)
		if err != nil {
			return err
		}
		defer h.Close()
		return netns.Set(h)
	})
	if err != nil {
		return nil, fmt.Errorf("enter netns %s: %w", name, err)
	}
	return t, nil
}
