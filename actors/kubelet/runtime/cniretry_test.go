package runtime

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
	opts := f.opts
	suffix := randHex(2)
	opts.Namespace, opts.Bridge = "skiffcni-"+suffix, "skc"+suffix
	opts.Root = filepath.Join(f.root, "cni-"+suffix)
	// A range of its own (the kubelet package's tests use 10.214/16 at the same time), from
	// the suffix's value, not its first character.
	opts.PodCIDR = fmt.Sprintf("10.215.%d.0/24", 1+int(hexValue(suffix))%250)
	opts.CNIBinDir = bin
	ctx := context.Background()
	rt, err := New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	uid := "uid-cni-" + randHex(4)
	t.Cleanup(func() {
		_ = rt.StopSandbox(ctx, uid)
		_ = rt.Close()
		_ = exec.Command("ip", "link", "del", opts.Bridge).Run() // else its route outlives it
	})

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
