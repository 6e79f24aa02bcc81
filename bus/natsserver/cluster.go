package natsserver

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// ClusterConfig joins a server to a NATS cluster. JetStream then runs clustered (Raft inside
// NATS), so streams can be replicated across the servers. JetStream's Raft groups tell servers
// apart by name: give each server of a cluster its own Config.ServerName.
type ClusterConfig struct {
	// Name of the cluster; "" = standalone. Every server of one cluster uses the same name.
	Name string
	// Host the route listener binds; default Config.Host.
	Host string
	// Port of the route listener; -1 = random.
	Port int
	// Routes are the other servers' route URLs (nats://host:port). Listing this server's own
	// URL too is fine, so every server can be given the same list.
	Routes []string
}

func (c ClusterConfig) apply(opts *server.Options, cfg Config) error {
	if c.Name == "" {
		if c.Port != 0 || len(c.Routes) > 0 {
			return errors.New("natsserver: Cluster.Name is required with a cluster port or routes")
		}
		return nil
	}
	if c.Port == 0 {
		return errors.New("natsserver: Cluster.Port is required (-1 = random)")
	}
	host := c.Host
	if host == "" {
		host = opts.Host
	}
	opts.Cluster = server.ClusterOpts{Name: c.Name, Host: host, Port: c.Port}
	for _, r := range c.Routes {
		u, err := url.Parse(r)
		if err != nil || u.Host == "" || (u.Scheme != "nats" && u.Scheme != "nats-route") {
			return fmt.Errorf("natsserver: Cluster.Routes: %q is not a nats://host:port URL", r)
		}
		opts.Routes = append(opts.Routes, u)
	}
	return nil
}

// ClusterURL is the route URL other servers dial; "" for a standalone server.
func (s *Server) ClusterURL() string {
	a := s.ns.ClusterAddr()
	if a == nil {
		return ""
	}
	return "nats://" + a.String()
}

// Cluster is a set of clustered servers in this process (tests, local runs). Each server keeps
// its store in its own directory, so a stopped server can be started again with its data.
type Cluster struct {
	Servers []*Server // nil where a server is stopped
	cfgs    []Config
	tmpDir  string
}

// StartCluster starts n clustered servers on loopback (cluster name "skiff", servers "n1".."nN"),
// each with a random client port, and waits until JetStream has a meta leader. base supplies
// the rest of each server's Config; base.DataDir "" puts the stores in a temporary directory
// removed by Shutdown.
func StartCluster(n int, base Config) (*Cluster, error) {
	if n < 1 {
		return nil, errors.New("natsserver: a cluster needs at least one server")
	}
	c := &Cluster{}
	root := base.DataDir
	if root == "" {
		d, err := os.MkdirTemp("", "skiff-nats-cluster-")
		if err != nil {
			return nil, err
		}
		c.tmpDir, root = d, d
	}
	// Routes must be known before the servers start, so route ports are picked up front;
	// another process may grab one in between, hence the retries.
	var err error
	for range 3 {
		if err = c.start(n, base, root); err == nil {
			return c, nil
		}
		c.stopAll()
	}
	c.cleanup()
	return nil, err
}

func (c *Cluster) start(n int, base Config, root string) error {
	ports, err := freePorts(n)
	if err != nil {
		return err
	}
	routes := make([]string, n)
	for i, p := range ports {
		routes[i] = "nats://127.0.0.1:" + strconv.Itoa(p)
	}
	c.cfgs = make([]Config, n)
	c.Servers = make([]*Server, n)
	for i := range n {
		cfg := base
		cfg.ServerName = "n" + strconv.Itoa(i+1)
		cfg.Host = "127.0.0.1"
		cfg.Port = -1
		cfg.DataDir = filepath.Join(root, cfg.ServerName)
		cfg.Cluster = ClusterConfig{Name: "skiff", Port: ports[i], Routes: routes}
		c.cfgs[i] = cfg
		if c.Servers[i], err = Start(cfg); err != nil {
			return err
		}
	}
	return c.WaitForLeader(30 * time.Second)
}

func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// WaitForLeader waits until the running servers agree on a JetStream meta leader and it
// knows every one of them as a usable peer, i.e. replicated streams can be placed.
func (c *Cluster) WaitForLeader(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		leaders, running, peers, current := 0, 0, 0, true
		for _, s := range c.Servers {
			if s == nil {
				continue
			}
			running++
			if s.ns.JetStreamIsLeader() {
				leaders++
				peers = len(s.ns.JetStreamClusterPeers())
			}
			current = current && s.ns.JetStreamIsCurrent()
		}
		if leaders == 1 && current && peers == running {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("natsserver: no JetStream meta leader after %v", timeout)
		}
		time.Sleep(25 * time.Millisecond) // polling a server-internal state: nothing to wait on
	}
}

// MetaLeader names the server leading JetStream's meta group ("" while there is none).
func (c *Cluster) MetaLeader() string {
	for i, s := range c.Servers {
		if s != nil && s.ns.JetStreamIsLeader() {
			return c.cfgs[i].ServerName
		}
	}
	return ""
}

// ClientURLs lists the running servers' client URLs, comma-separated (nats.Connect's form).
func (c *Cluster) ClientURLs() string {
	var urls []string
	for _, s := range c.Servers {
		if s != nil {
			urls = append(urls, s.ClientURL())
		}
	}
	return strings.Join(urls, ",")
}

// Connect dials the running servers; the connection fails over between them.
func (c *Cluster) Connect(opts ...nats.Option) (*nats.Conn, error) {
	return nats.Connect(c.ClientURLs(), append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}, opts...)...)
}

// Index returns the position of the server named name, or -1.
func (c *Cluster) Index(name string) int {
	for i, cfg := range c.cfgs {
		if cfg.ServerName == name {
			return i
		}
	}
	return -1
}

// Stop shuts server i down; its store stays.
func (c *Cluster) Stop(i int) {
	if s := c.Servers[i]; s != nil {
		s.Shutdown()
		c.Servers[i] = nil
	}
}

// Shutdown stops every server and removes a temporary store.
func (c *Cluster) Shutdown() {
	c.stopAll()
	c.cleanup()
}

func (c *Cluster) stopAll() {
	for i := range c.Servers {
		c.Stop(i)
	}
}

func (c *Cluster) cleanup() {
	if c.tmpDir != "" {
		_ = os.RemoveAll(c.tmpDir)
	}
}
