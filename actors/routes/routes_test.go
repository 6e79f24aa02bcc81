package routes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/testkit/needs"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// The route actor keeps exactly one route (and one no-masquerade rule) per other Ready node
// with a pod CIDR and an InternalIP, skipping ranges that overlap its own, and follows nodes
// turning Ready, NotReady and going away. It runs against a private netns.
func TestPodRoutesFollowReadyNodes(t *testing.T) {
	if os.Geteuid() != 0 {
		needs.Skip(t, "routes need root (a network namespace, netlink, iptables)")
	}
	for _, bin := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(bin); err != nil {
			needs.Skipf(t, "%s not installed", bin)
		}
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	name := "skrt" + hex.EncodeToString(b)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", name).Run() })
	// A veth pair inside the netns: an up link on 10.77.0.0/24 that the gateways are on.
	run("-n", name, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1")
	run("-n", name, "addr", "add", "10.77.0.2/24", "dev", "eth0")
	run("-n", name, "link", "set", "eth1", "up")
	run("-n", name, "link", "set", "eth0", "up")
	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	nl, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nl.Close)
	iptables := []string{"ip", "netns", "exec", name, "iptables"}

	cp := testutil.StartControlPlane(t)
	producer, err := New(cp.Informers, "self", "10.88.1.0/24", Env{Netlink: nl, IPTables: iptables}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := cp.Actors.Spawn("routes-test", producer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cp.Actors.Stop(pid) })

	setNode(t, cp.Client, "self", "10.88.1.0/24", "10.77.0.2", true)
	setNode(t, cp.Client, "b", "10.88.2.0/24", "10.77.0.3", true)
	setNode(t, cp.Client, "c", "10.88.3.0/24", "10.77.0.4", false) // NotReady
	setNode(t, cp.Client, "d", "10.88.0.0/16", "10.77.0.5", true)  // overlaps ours
	setNode(t, cp.Client, "e", "10.88.5.0/24", "", true)           // no address
	waitRoutes(t, nl, iptables, map[string]string{"10.88.2.0/24": "10.77.0.3"})

	setNode(t, cp.Client, "c", "10.88.3.0/24", "10.77.0.4", true)
	k, _ := schemas.ByResource("", "v1", "nodes")
	if err := cp.Client.Delete(context.Background(), k, "", "b", nil); err != nil {
		t.Fatal(err)
	}
	waitRoutes(t, nl, iptables, map[string]string{"10.88.3.0/24": "10.77.0.4"})

	setNode(t, cp.Client, "c", "10.88.3.0/24", "10.77.0.4", false)
	waitRoutes(t, nl, iptables, map[string]string{})
}

// setNode creates or updates a Node with that pod CIDR, InternalIP ("" = none) and Ready.
func setNode(t *testing.T, c *apiclient.Client, name, cidr, ip string, ready bool) {
	t.Helper()
	ctx := context.Background()
	k, _ := schemas.ByResource("", "v1", "nodes")
	var n *corev1.Node
	if o, err := c.Get(ctx, k, "", name); err == nil {
		n = o.(*corev1.Node)
	} else {
		o, err := c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDR: cidr}})
		if err != nil {
			t.Fatal(err)
		}
		n = o.(*corev1.Node)
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st, LastHeartbeatTime: metav1.Now()}}
	n.Status.Addresses = nil
	if ip != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
	}
	if _, err := c.UpdateStatus(ctx, n); err != nil {
		t.Fatal(err)
	}
}

// waitRoutes waits until the agent's routes and no-masquerade rules are exactly want.
func waitRoutes(t *testing.T, nl *netlink.Handle, iptables []string, want map[string]string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		rs, err := nl.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: routeProtocol}, netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			return err
		}
		got := map[string]string{}
		for _, r := range rs {
			got[r.Dst.String()] = r.Gw.String()
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("routes %v, want %v", got, want)
		}
		out, err := exec.Command(iptables[0], append(iptables[1:], "-t", "nat", "-S", masqChain)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("iptables: %v: %s", err, out)
		}
		rules := map[string]string{}
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) == 6 && f[0] == "-A" && f[5] == "ACCEPT" {
				rules[f[3]] = want[f[3]]
			}
		}
		if !maps.Equal(rules, want) {
			return fmt.Errorf("no-masquerade rules for %v, want %v", rules, want)
		}
		// The chain is reached from POSTROUTING for traffic from this node's pods.
		jump := append(iptables[1:len(iptables):len(iptables)], "-t", "nat", "-C", "POSTROUTING", "-s", "10.88.1.0/24", "-j", masqChain)
		if out, err := exec.Command(iptables[0], jump...).CombinedOutput(); err != nil {
			return fmt.Errorf("no jump to %s: %v: %s", masqChain, err, out)
		}
		return nil
	})
}
