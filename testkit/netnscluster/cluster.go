// Package netnscluster builds a multi-node Skiff cluster on one Linux machine for end-to-end
// tests: a host bridge, and per node a network namespace wired into it by a veth (own IP in a
// private /24, own pod CIDR) in which a `skiff agent` process runs with its own data dir (and
// so its own containerd) and its own cgroup2 subtree. The control plane runs in the test
// process with its NATS server listening on the bridge's host address.
//
// Each node gets its own containerd namespace and so its own cgroup subtree /<namespace>
// (cgrouptest's subtree.go says why and how it is laid out).
package netnscluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/actors/agent"
	"github.com/skiff-sh/skiff/actors/controllers"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/bus/natsserver"
	"github.com/skiff-sh/skiff/deploy/images/examples"
	"github.com/skiff-sh/skiff/testkit/cgrouptest"
	"github.com/skiff-sh/skiff/testkit/hostbridge"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// Options shape a cluster; zero values get the defaults listed.
type Options struct {
	Nodes int // default 2
	// Node failure detection, kept short so fault tests finish quickly.
	NodeGracePeriod    time.Duration // default 4 s
	PodEvictionTimeout time.Duration // default 4 s
	LeaseRenew         time.Duration // agents' lease renewal, default 1 s
	// NATSServers: 1 (default) runs one server in the test process; more run that many
	// `skiff nats` processes as one JetStream cluster, with the state stream replicated on 3.
	NATSServers int
	// Components of the control plane in the test process (controlplane.Config.Components);
	// nil = all. Others can run as `skiff server` processes (StartServer).
	Components []string
}

// Cluster is a running netns cluster. Everything it made is removed when the test ends.
type Cluster struct {
	t         testing.TB
	opts      Options
	ID        string // random suffix of every name the cluster uses
	Bridge    string
	HostIP    string             // the bridge's address; NATS listens here
	NATS      *natsserver.Server // the single in-process server (NATSServers 1)
	NATSProcs []*Proc            // the clustered servers (NATSServers > 1)
	CP        *controlplane.ControlPlane
	Nodes     []*Node
	dir       string
	natsPort  int
	apiListen string   // the apiserver's address, kept across restarts as a real one's is
	natsURLs  []string // clustered servers' client URLs
	skiff     string   // the skiff binary
	images    string
	cgroup2   string // the host's cgroup2 mount
}

// Skip reasons are checked before anything is built.
func supported() string {
	if why := agent.Supported(); why != "" {
		return why
	}
	// containerd, its shim and the CNI plugins come in the skiff binary the nodes run.
	for _, bin := range []string{"runc", "ip", "nsenter", "iptables"} {
		if _, err := exec.LookPath(bin); err != nil {
			return bin + " not installed (bash .ci/deps/node.sh installs the node binaries)"
		}
	}
	if cgrouptest.HostHierarchy() == "" {
		return "no cgroup2 hierarchy mounted"
	}
	return ""
}

// Start builds the cluster and waits until every node is Ready.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	if why := supported(); why != "" {
		t.Skip(why)
	}
	if o.Nodes <= 0 {
		o.Nodes = 2
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.NodeGracePeriod, 4*time.Second)
	def(&o.PodEvictionTimeout, 4*time.Second)
	def(&o.LeaseRenew, time.Second)
	if o.NATSServers <= 0 {
		o.NATSServers = 1
	}
	c := &Cluster{t: t, opts: o, ID: randHex(2), cgroup2: cgrouptest.HostHierarchy()}
	c.Bridge = "skb" + c.ID
	c.skiff = testutil.BuildBinary(t, "./services/skiff")
	// Short paths: containerd's socket path must fit in a unix socket address.
	dir, err := os.MkdirTemp("", "sknet-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	t.Cleanup(func() { os.RemoveAll(dir) })
	c.images = images(t, dir)
	// Random private /24s for node addresses and pod ranges; other tests run beside this one.
	b := randBytes(3)
	hostNet := fmt.Sprintf("10.%d.%d", 200+int(b[0])%50, b[1])
	podNet := 100 + int(b[2])%100
	c.HostIP = hostNet + ".1"
	removeBridge, err := hostbridge.Create(c.Bridge, c.HostIP+"/24")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(removeBridge)
	if o.NATSServers > 1 {
		c.startNATSCluster()
	}
	c.StartControlPlane()
	for i := range o.Nodes {
		n := &Node{
			c: c, Index: i,
			Name:      fmt.Sprintf("n%d-%s", i, c.ID),
			Netns:     fmt.Sprintf("sk%sn%d", c.ID, i),
			IP:        fmt.Sprintf("%s.%d", hostNet, 10+i),
			PodCIDR:   fmt.Sprintf("10.%d.%d.0/24", podNet, i),
			Namespace: fmt.Sprintf("skiff-%s-n%d", c.ID, i),
			DataDir:   filepath.Join(dir, fmt.Sprintf("n%d", i)),
			hostVeth:  fmt.Sprintf("skv%s%d", c.ID, i),
		}
		n.Cgroup = filepath.Join(c.cgroup2, n.Namespace)
		t.Cleanup(n.destroy)
		if err := n.wire(); err != nil {
			t.Fatal(err)
		}
		c.Nodes = append(c.Nodes, n)
		n.Start()
	}
	for _, n := range c.Nodes {
		n.WaitReady(true, 60*time.Second)
	}
	return c
}

var (
	imagesMu  sync.Mutex
	imagesDir string
)

// images builds the example images the nodes import: once per process into
// SKIFF_TEST_BIN_DIR/images when that is set (kept, like the binaries), else under dir.
func images(t testing.TB, dir string) string {
	t.Helper()
	imagesMu.Lock()
	defer imagesMu.Unlock()
	if imagesDir != "" {
		return imagesDir
	}
	out := filepath.Join(dir, "images")
	shared := os.Getenv("SKIFF_TEST_BIN_DIR") != ""
	if shared {
		out = filepath.Join(os.Getenv("SKIFF_TEST_BIN_DIR"), "images")
	}
	if _, err := examples.BuildHTTPEcho(out); err != nil {
		t.Fatal(err)
	}
	if shared {
		imagesDir = out
	}
	return out
}

// StartControlPlane starts the control plane in the test process, with its state under the
// cluster's dir: on the NATS cluster, or on a NATS server it starts on the bridge address (the
// same port on a restart). The apiserver, too, comes back on its address, so what follows
// that address (the kubernetes Service) stays as it was.
func (c *Cluster) StartControlPlane() {
	c.t.Helper()
	if c.apiListen == "" {
		c.apiListen = "127.0.0.1:0"
	}
	cfg := controlplane.Config{Listen: c.apiListen, Components: c.opts.Components,
		Controllers:       controllers.Options{NodeGracePeriod: c.opts.NodeGracePeriod, PodEvictionTimeout: c.opts.PodEvictionTimeout, NodeMonitorPeriod: 250 * time.Millisecond},
		EncryptionKeyFile: c.EncryptionKeyFile()}
	if c.opts.NATSServers > 1 {
		cfg.NATSURL, cfg.Replicas = c.NATSURL(), 3
	} else {
		ns, err := natsserver.Start(natsserver.Config{Host: c.HostIP, Port: c.portOrRandom(), DataDir: filepath.Join(c.dir, "nats")})
		if err != nil {
			c.t.Fatal(err)
		}
		c.NATS = ns
		c.natsPort = ns.NATS().Addr().(*net.TCPAddr).Port
		cfg.NATSURL = ns.ClientURL()
	}
	c.t.Cleanup(c.StopControlPlane)
	// A fresh JetStream cluster takes a moment to elect the leaders the state stream needs.
	testutil.Eventually(c.t, 60*time.Second, 200*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cp, err := controlplane.Start(ctx, cfg)
		if err != nil {
			return fmt.Errorf("control plane: %w", err)
		}
		c.CP = cp
		if u, err := url.Parse(cp.URL()); err == nil {
			c.apiListen = u.Host
		}
		return nil
	})
}

// StopControlPlane stops the control plane and its in-process NATS server (idempotent).
func (c *Cluster) StopControlPlane() {
	if c.CP != nil {
		c.CP.Stop()
		c.CP = nil
	}
	if c.NATS != nil {
		c.NATS.Shutdown()
		c.NATS = nil
	}
}

func (c *Cluster) portOrRandom() int {
	if c.natsPort != 0 {
		return c.natsPort
	}
	return -1
}

// NATSURL is what agents and servers dial (comma-separated for a NATS cluster).
func (c *Cluster) NATSURL() string {
	if len(c.natsURLs) > 0 {
		return strings.Join(c.natsURLs, ",")
	}
	return fmt.Sprintf("nats://%s:%d", c.HostIP, c.natsPort)
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func randHex(n int) string { return hex.EncodeToString(randBytes(n)) }
