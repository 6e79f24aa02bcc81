package main

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/bpf/lb"
	"github.com/skiff-sh/skiff/bpf/nodeport"
	"github.com/skiff-sh/skiff/testkit/bpffstest"
	"github.com/skiff-sh/skiff/testkit/needs"
)

func TestWriteProxyDump(t *testing.T) {
	vip := netip.MustParseAddr("10.96.0.10")
	ds := []lb.ServiceDump{
		{Key: lb.ServiceKey{VIP: vip, Port: 53, Proto: lb.UDP}},
		{Key: lb.ServiceKey{VIP: vip, Port: 80, Proto: lb.TCP}, AffinityTimeout: 30 * time.Second, Backends: []lb.Backend{
			{Addr: netip.MustParseAddr("127.0.0.2"), Port: 8080}, {Addr: netip.MustParseAddr("127.0.0.3"), Port: 8080},
		}},
	}
	var b bytes.Buffer
	if err := writeProxyDump(&b, ds); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want header + 2 rows:\n%s", b.String())
	}
	if f := strings.Fields(lines[1]); f[0] != "10.96.0.10:53/UDP" || f[2] != "<none>" {
		t.Errorf("row 1: %q", lines[1])
	}
	if f := strings.Fields(lines[2]); f[0] != "10.96.0.10:80/TCP" || f[1] != "ClientIP" || f[2] != "30s" || f[3] != "127.0.0.2:8080,127.0.0.3:8080" {
		t.Errorf("row 2: %q", lines[2])
	}
}

// skiff proxy dump reads the maps a proxy pinned, with the proxy gone.
func TestProxyDumpReadsPinnedMaps(t *testing.T) {
	root := bpffstest.Mount(t)
	pin := filepath.Join(root, "node-a")
	dp, err := lb.Load(lb.Options{PinPath: pin, MaxServices: 16, MaxBackends: 64, AffinityEntries: 16, SocketEntries: 16})
	if err != nil {
		needs.Skipf(t, "kernel cannot load the socket LB programs: %v", err)
	}
	k := lb.ServiceKey{VIP: netip.MustParseAddr("10.96.0.10"), Port: 80, Proto: lb.TCP}
	if _, err := dp.Upsert(k, lb.ServiceSpec{Backends: []lb.Backend{{Addr: netip.MustParseAddr("127.0.0.2"), Port: 8080}}}); err != nil {
		t.Fatal(err)
	}
	dp.Close() // the pins keep the maps
	t.Cleanup(func() { _ = os.RemoveAll(pin) })
	np, err := nodeport.Load(nodeport.Options{PinPath: filepath.Join(pin, "nodeport")})
	if err != nil {
		t.Fatal(err)
	}
	nk := nodeport.Key{Addr: netip.MustParseAddr("10.9.0.2"), Port: 30080, Proto: lb.TCP}
	if err := np.Set(nk, []nodeport.Backend{{Addr: netip.MustParseAddr("10.1.0.5"), Port: 8080, Local: true}}); err != nil {
		t.Fatal(err)
	}
	np.Close()

	cmd := newProxy(&globals{})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"dump", "--pin-dir", pin})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "10.96.0.10:80/TCP") || !strings.Contains(out.String(), "127.0.0.2:8080") ||
		!strings.Contains(out.String(), "10.9.0.2:30080/TCP  10.1.0.5:8080(local)") {
		t.Fatalf("dump output:\n%s", out.String())
	}
	cmd = newProxy(&globals{})
	cmd.SetArgs([]string{"dump", "--pin-dir", filepath.Join(root, "nothing")})
	if err := cmd.Execute(); err == nil {
		t.Fatal("dump of a node with no proxy succeeded")
	}
}
