package netnscluster

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Host is a netns on the cluster's bridge that runs no agent: a machine outside the cluster,
// for traffic that reaches the nodes from elsewhere (NodePort, LoadBalancer, hostPort).
type Host struct {
	Netns string
	IP    string
	veth  string
}

// AddHost wires an outside host (index i, 0-9) to the bridge; it is removed when the test ends.
func (c *Cluster) AddHost(i int) *Host {
	c.t.Helper()
	prefix := c.HostIP[:strings.LastIndex(c.HostIP, ".")]
	h := &Host{Netns: fmt.Sprintf("sk%sh%d", c.ID, i), IP: fmt.Sprintf("%s.%d", prefix, 200+i), veth: fmt.Sprintf("skh%s%d", c.ID, i)}
	c.t.Cleanup(func() {
		_ = run("ip", "netns", "delete", h.Netns)
		_ = run("ip", "link", "delete", h.veth)
	})
	for _, s := range [][]string{
		{"netns", "add", h.Netns},
		{"link", "add", h.veth, "type", "veth", "peer", "name", "eth0", "netns", h.Netns},
		{"link", "set", h.veth, "master", c.Bridge, "up"},
		{"-n", h.Netns, "addr", "add", h.IP + "/24", "dev", "eth0"},
		{"-n", h.Netns, "link", "set", "eth0", "up"},
		{"-n", h.Netns, "link", "set", "lo", "up"},
	} {
		if err := run("ip", s...); err != nil {
			c.t.Fatal(err)
		}
	}
	return h
}

// Run runs a command inside the host's netns and returns its stdout.
func (h *Host) Run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.Netns}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
