package main

import (
	"bytes"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/bpf/policy"
	"github.com/skiff-sh/skiff/bpf/tcattach"
	"github.com/skiff-sh/skiff/testkit/bpffstest"
	"github.com/skiff-sh/skiff/testkit/vethns"
)

// skiff policy dump reads the maps the policy actor pinned, with the actor gone.
func TestPolicyDumpReadsPinnedMaps(t *testing.T) {
	root := bpffstest.Mount(t)
	pin := filepath.Join(root, "node-a")
	dp, err := policy.Load(pin)
	if err != nil {
		t.Fatal(err)
	}
	pod := netip.MustParseAddr("10.88.0.5")
	if err := dp.SetHostAddrs([]netip.Addr{netip.MustParseAddr("10.88.0.1")}); err != nil {
		t.Fatal(err)
	}
	if err := dp.SetRule(policy.RuleKey{Pod: pod, Dir: policy.Ingress, Peer: netip.MustParsePrefix("10.88.0.0/16")},
		[]policy.PortRange{{Proto: policy.ProtoTCP, Lo: 8080, Hi: 8090}, {Proto: policy.ProtoUDP, Lo: 53, Hi: 53}}); err != nil {
		t.Fatal(err)
	}
	if err := dp.SetRule(policy.RuleKey{Pod: pod, Dir: policy.Ingress, Peer: netip.MustParsePrefix("10.88.1.0/24")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := dp.SetEndpoint(pod, policy.Endpoint{Ingress: true, Egress: true}); err != nil {
		t.Fatal(err)
	}
	if err := dp.SetEndpoint(netip.MustParseAddr("10.88.0.6"), policy.Endpoint{Egress: true}); err != nil {
		t.Fatal(err)
	}
	dp.Close()
	// The programs on a pod veth by legacy tc (a kernel without tcx), as the dump tells.
	veth := vethns.New(t)
	if dp, err = policy.LoadMode(pin, tcattach.Legacy); err != nil {
		t.Fatal(err)
	}
	defer dp.Remove()

	cmd := newPolicy(&globals{})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"dump", "--pin-dir", pin})
	veth.Do(t, veth.Node, func() {
		if _, err := dp.Attach(veth.Index); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
	})
	for _, want := range []string{
		"policy programs attached by: tc (legacy clsact), 2 filters",
		"10.88.0.5  ingress,egress  ingress    10.88.0.0/16  TCP/8080-8090,UDP/53",
		"10.88.0.5  ingress,egress  ingress    10.88.1.0/24  <none>",
		"10.88.0.6  egress          -          <none>        <none>",
		"node addresses (always admitted): 10.88.0.1",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dump lacks %q:\n%s", want, out.String())
		}
	}
	cmd = newPolicy(&globals{})
	cmd.SetArgs([]string{"dump", "--pin-dir", filepath.Join(root, "nothing")})
	if err := cmd.Execute(); err == nil {
		t.Fatal("dump of a node without policy maps succeeded")
	}
}
