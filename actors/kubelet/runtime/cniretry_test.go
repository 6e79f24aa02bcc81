package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// A CNI chain that fails after host-local allocated the pod's IP must not leave the IP
// taken: the kubelet retries with the same sandbox ID, and host-local refuses a second
// allocation for it.
func TestFailedCNIAddReleasesTheIPForTheRetry(t *testing.T) {
	f := env(t)
	bin := t.TempDir()
	for _, p := range CNIPlugins {
		if p == "firewall" {
			continue
		}
		if err := os.Symlink(filepath.Join(defaultCNIBinDir, p), filepath.Join(bin, p)); err != nil {
			t.Fatal(err)
		}
	}
	// The last plugin of the chain fails its ADDs until the test allows them.
	allow := filepath.Join(bin, "allow")
	script := fmt.Sprintf(`#!/bin/sh
if [ "$CNI_COMMAND" = ADD ] && [ ! -e %q ]; then
	echo '{"cniVersion":"1.0.0","code":999,"msg":"injected failure"}'
	exit 1
fi
exec %q
`, allow, filepath.Join(defaultCNIBinDir, "firewall"))
	if err := os.WriteFile(filepath.Join(bin, "firewall"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	rt := ownNetworkRuntime(t, f, func(o *Options) { o.CNIBinDir = bin })
	ctx := context.Background()
	uid := "uid-cni-" + randHex(4)
	t.Cleanup(func() { _ = rt.StopSandbox(ctx, uid) })

	if _, err := rt.RunSandbox(ctx, SandboxConfig{PodUID: uid, PodName: "cni"}); err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("first RunSandbox = %v, want the injected CNI failure", err)
	}
	if err := os.WriteFile(allow, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sb, err := rt.RunSandbox(ctx, SandboxConfig{PodUID: uid, PodName: "cni"})
	if err != nil {
		t.Fatalf("retry after the failed add: %v", err)
	}
	if sb.IP == "" {
		t.Fatal("retry: no pod IP")
	}
}

// ownNetworkRuntime is a Runtime of the fixture's containerd with a bridge, pod range and
// root of its own, changed by opt; closed and its bridge deleted when the test ends.
func ownNetworkRuntime(t *testing.T, f *fixture, opt func(*Options)) *Runtime {
	t.Helper()
	opts := f.opts
	suffix := randHex(2)
	opts.Namespace, opts.Bridge = "skiffcni-"+suffix, "skc"+suffix
	opts.Root = filepath.Join(f.root, "cni-"+suffix)
	// A range of its own (the kubelet package's tests use 10.214/16 at the same time), from
	// the suffix's value, not its first character.
	opts.PodCIDR = fmt.Sprintf("10.215.%d.0/24", 1+int(hexValue(suffix))%250)
	opt(&opts)
	rt, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rt.Close()
		_ = exec.Command("ip", "link", "del", opts.Bridge).Run() // else its route outlives it
	})
	return rt
}

// A failing NetworkReady fails the sandbox as a failed CNI ADD does: RunSandbox returns its
// error and the network is torn down, so the retry gets the pod's address again. The check
// sees the pod's namespace with eth0 wired.
func TestNetworkReadyFailureFailsTheSandbox(t *testing.T) {
	f := env(t)
	refuse := true
	var seen []string
	rt := ownNetworkRuntime(t, f, func(o *Options) {
		o.NetworkReady = func(_ context.Context, netnsPath string) error {
			ns, err := netns.GetFromPath(netnsPath)
			if err != nil {
				return err
			}
			defer ns.Close()
			h, err := netlink.NewHandleAt(ns)
			if err != nil {
				return err
			}
			defer h.Close()
			l, err := h.LinkByName("eth0")
			if err != nil {
				return err
			}
			seen = append(seen, l.Type())
			if refuse {
				return errors.New("no policy programs on the veth")
			}
			return nil
		}
	})
	ctx := context.Background()
	uid := "uid-ready-" + randHex(4)
	t.Cleanup(func() { _ = rt.StopSandbox(ctx, uid) })
	_, err := rt.RunSandbox(ctx, SandboxConfig{PodUID: uid, PodName: "ready"})
	if err == nil || !strings.Contains(err.Error(), "no policy programs on the veth") {
		t.Fatalf("RunSandbox with the check failing = %v, want its error", err)
	}
	if isNetNS(rt.netnsPath(sandboxID(uid))) {
		t.Fatal("the failed sandbox's network namespace is still there")
	}
	refuse = false
	sb, err := rt.RunSandbox(ctx, SandboxConfig{PodUID: uid, PodName: "ready"})
	if err != nil || sb.IP == "" {
		t.Fatalf("retry: %v (IP %q)", err, sb)
	}
	if !slices.Equal(seen, []string{"veth", "veth"}) {
		t.Fatalf("the check saw eth0 as %v, want a veth twice", seen)
	}
}
