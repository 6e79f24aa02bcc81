package vm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
	"github.com/skiff-sh/skiff/deploy/images/examples"
	"github.com/skiff-sh/skiff/testkit/needs"
	"github.com/skiff-sh/skiff/testkit/qemuvm"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// modules are what a node needs beyond the Debian kernel's built-ins: the virtio NIC and RNG,
// veth and bridge for pod networking, overlay for containerd's snapshotter, and the netfilter
// pieces the CNI bridge plugin's masquerading uses (iptables-legacy).
var modules = []string{
	"virtio_pci", "virtio_net", "virtio_rng", "veth", "bridge", "overlay",
	"ip_tables", "iptable_filter", "iptable_nat", "nf_nat", "nf_conntrack",
	"xt_MASQUERADE", "xt_comment", "xt_addrtype", "xt_conntrack", "xt_mark", "xt_multiport",
	// The CNI firewall plugin opens both iptables protocols even for IPv4-only pods.
	"ip6_tables", "ip6table_filter",
	// This kernel (6.1) has no tcx: NetworkPolicy and NodePort programs go on as legacy tc
	// filters, under a clsact qdisc. Busybox's insmod loads nothing on demand.
	"sch_ingress", "cls_bpf",
}

// initScript is the VM's PID 1. Per-VM settings come from the kernel command line
// (skiff.<key>=<value>) so both VMs boot the same initramfs.
const initScript = `#!/bin/busybox sh
# runc's pivot_root cannot leave the initramfs (rootfs never unmounts): copy the image into a
# tmpfs and switch_root there first; switch_root frees the initramfs copy.
if [ ! -e /.switched ]; then
	/bin/busybox mkdir -p /newroot
	/bin/busybox mount -t tmpfs -o mode=0755 tmpfs /newroot
	for d in /*; do [ "$d" = /newroot ] || /bin/busybox cp -a "$d" /newroot/; done
	/bin/busybox touch /newroot/.switched
	exec /bin/busybox switch_root /newroot /init
fi
/bin/busybox mount -t proc proc /proc
/bin/busybox --install -s /bin
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm /sys/fs/cgroup /sys/fs/bpf /var/lib/skiff
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t bpf bpf /sys/fs/bpf
echo "+cpu +memory +pids +io" > /sys/fs/cgroup/cgroup.subtree_control
# containerd's data: its own tmpfs (overlayfs needs xattrs and d_type on the upper dir).
mount -t tmpfs -o size=512m tmpfs /var/lib/skiff
for m in $(cat /etc/skiff/modules); do insmod /lib/modules/$(uname -r)/$m || echo "skiff-vm: insmod $m failed"; done
arg() { sed -n "s/.*skiff\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
NODE=$(arg node)
IP=$(arg ip)
hostname "$NODE"
ip link set lo up
ip addr add "$IP" dev eth0
ip link set eth0 up
ip route add default via "$(arg gw)"
echo "skiff-vm: $NODE userland up at $(cut -d' ' -f1 /proc/uptime)s"
export PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# Routes to the other VMs' pod CIDRs come from the agent (--route-pod-cidrs).
skiff agent --nats-url "$(arg nats)" --node-name "$NODE" --node-ip "${IP%/*}" \
	--pod-cidr "$(arg podcidr)" --route-pod-cidrs --node-lease-renew-interval "$(arg renew)" \
	--data-dir /var/lib/skiff --images-dir /images &
wait $!
echo "skiff-vm: agent exited with $?"
poweroff -f
`

// buildNodeImage writes the initramfs every VM node boots and returns its path.
func buildNodeImage(t *testing.T, k qemuvm.Kernel, dir string) string {
	t.Helper()
	r, err := qemuvm.NewBusybox()
	if err != nil {
		t.Fatal(err)
	}
	r.File("/init", 0o755, []byte(initScript))
	order, err := r.Modules(k.Modules, k.Version, modules...)
	if err != nil {
		t.Fatal(err)
	}
	r.File("/etc/skiff/modules", 0o644, []byte(strings.Join(order, "\n")+"\n"))

	// Everything the node runs, checked before the (slow) agent build.
	bins := map[string]string{}
	for _, name := range []string{"containerd", "containerd-shim-runc-v2", "runc"} {
		p, err := exec.LookPath(name)
		if err != nil {
			needs.Skipf(t, "%s not installed (bash .ci/deps/node.sh installs it)", name)
		}
		bins["/usr/local/bin/"+name] = p
	}
	for _, p := range kruntime.CNIPlugins {
		if _, err := os.Stat("/opt/cni/bin/" + p); err != nil {
			needs.Skip(t, "CNI plugins not installed (bash .ci/deps/node.sh installs them)")
		}
		bins["/opt/cni/bin/"+p] = "/opt/cni/bin/" + p
	}
	// The CNI bridge plugin masquerades pod egress with iptables and the firewall plugin
	// accepts pod traffic in FORWARD; the legacy backend needs only the x_tables modules, not nftables.
	legacy, err := exec.LookPath("xtables-legacy-multi")
	ext, _ := filepath.Glob("/usr/lib/*/xtables")
	if err != nil || len(ext) == 0 {
		needs.Skip(t, "iptables not installed (bash .ci/deps/vm.sh installs it)")
	}
	bins["/usr/sbin/xtables-legacy-multi"] = legacy
	bins["/usr/local/bin/skiff"] = testutil.BuildBinary(t, "./services/skiff")
	for dst, src := range bins {
		if err := r.Binary(dst, src); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"} {
		r.Symlink("/usr/sbin/"+l, "xtables-legacy-multi")
	}
	if err := r.CopyTree(ext[0], ext[0]); err != nil {
		t.Fatal(err)
	}

	images := filepath.Join(dir, "images")
	if _, err := examples.BuildHTTPEcho(images); err != nil {
		t.Fatal(err)
	}
	if err := r.CopyTree("/images", images); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "initramfs.cpio")
	if err := r.Write(out); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(out); err == nil {
		t.Logf("initramfs: %d MiB", st.Size()>>20)
	}
	return out
}

// cmdline is the per-VM part of the kernel command line that initScript reads; "quiet"
// keeps the kernel's console to errors, which halves a boot under emulation.
func cmdline(kv map[string]string) string {
	b := strings.Builder{}
	b.WriteString("quiet")
	for k, v := range kv {
		fmt.Fprintf(&b, " skiff.%s=%s", k, v)
	}
	return b.String()
}
