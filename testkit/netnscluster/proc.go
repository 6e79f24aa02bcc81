package netnscluster

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

// Proc is a skiff process the cluster runs on the host (a NATS server, a control-plane
// component), with its output in a log file.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// startProc runs the skiff binary with args; the process is killed when the test ends.
func (c *Cluster) startProc(name string, args ...string) *Proc {
	c.t.Helper()
	p := &Proc{Name: name, log: filepath.Join(c.dir, name+".log"), done: make(chan struct{})}
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	defer logf.Close()
	p.cmd = exec.Command(c.skiff, args...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	c.t.Cleanup(func() {
		p.Kill()
		if c.t.Failed() {
			c.t.Logf("%s log:\n%s", name, p.Log())
		}
	})
	return p
}

// Kill is a crash: SIGKILL, no clean shutdown.
func (p *Proc) Kill() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Log is the process's output so far.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// StartServer runs `skiff server` on the host against the cluster's NATS, with extra args
// (e.g. --components scheduler --lease-duration 2s --identity a).
func (c *Cluster) StartServer(name string, args ...string) *Proc {
	c.t.Helper()
	dir := filepath.Join(c.dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		c.t.Fatal(err)
	}
	// No /metrics listener: several servers share the host's network namespace.
	base := []string{"server", "--nats-url", c.NATSURL(), "--data-dir", dir, "--metrics-listen", ""}
	if servesAPI(args) {
		base = append(base, "--encryption-key-file", c.EncryptionKeyFile())
	}
	return c.startProc(name, append(base, args...)...)
}

// servesAPI reports whether `skiff server` args run an apiserver (its --components default does).
func servesAPI(args []string) bool {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--components="); ok {
			return slices.Contains(strings.Split(v, ","), "apiserver")
		}
		if a == "--components" && i+1 < len(args) {
			return slices.Contains(strings.Split(args[i+1], ","), "apiserver")
		}
	}
	return true
}

// EncryptionKeyFile is the Secrets key file every apiserver of the cluster shares.
func (c *Cluster) EncryptionKeyFile() string { return filepath.Join(c.dir, "encryption.keys") }

// startNATSCluster runs Options.NATSServers `skiff nats` processes clustered on the bridge
// address, so agents in their netns reach every one of them.
func (c *Cluster) startNATSCluster() {
	c.t.Helper()
	n := c.opts.NATSServers
	cports, rports := c.freePorts(n), c.freePorts(n)
	routes := make([]string, n)
	for i := range n {
		routes[i] = fmt.Sprintf("nats://%s:%d", c.HostIP, rports[i])
		c.natsURLs = append(c.natsURLs, fmt.Sprintf("nats://%s:%d", c.HostIP, cports[i]))
	}
	for i := range n {
		name := fmt.Sprintf("nats%d", i)
		c.NATSProcs = append(c.NATSProcs, c.startProc(name, "nats", "--name", name,
			"--listen", fmt.Sprintf("%s:%d", c.HostIP, cports[i]), "--cluster-listen", fmt.Sprintf("%s:%d", c.HostIP, rports[i]),
			"--routes", strings.Join(routes, ","), "--cluster-name", "skiff-"+c.ID, "--data-dir", filepath.Join(c.dir, name)))
	}
	for i, u := range c.natsURLs {
		addr := strings.TrimPrefix(u, "nats://")
		testutil.Eventually(c.t, 30*time.Second, 50*time.Millisecond, func() error {
			select {
			case <-c.NATSProcs[i].done:
				c.t.Fatalf("nats%d exited:\n%s", i, c.NATSProcs[i].Log())
			default:
			}
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				conn.Close()
			}
			return err
		})
	}
}

// freePorts picks n free TCP ports on the bridge address.
func (c *Cluster) freePorts(n int) []int {
	c.t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", c.HostIP+":0")
		if err != nil {
			c.t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
