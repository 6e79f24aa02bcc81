package vm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/testkit/needs"
	"github.com/skiff-sh/skiff/testkit/qemuvm"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// cpModules: the NIC and the disk, and ext4 on it.
var cpModules = []string{"virtio_pci", "virtio_net", "virtio_rng", "virtio_blk", "ext4"}

// cpInit is PID 1 of the control-plane VM: skiff up with its data on the virtio disk. The
// guest's periodic writeback is pushed out past the run, so data nothing fsynced stays in the
// guest's page cache until the power cut (by default it would be there for up to 30 s).
const cpInit = `#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox --install -s /bin
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
for m in $(cat /etc/skiff/modules); do insmod /lib/modules/$(uname -r)/$m || echo "skiff-vm: insmod $m failed"; done
echo 30000 > /proc/sys/vm/dirty_writeback_centisecs
echo 30000 > /proc/sys/vm/dirty_expire_centisecs
arg() { sed -n "s/.*skiff\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
mkdir -p /data
mount -t ext4 /dev/vda /data || echo "skiff-vm: mount /dev/vda failed"
export PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ip link set lo up
ip addr add "$(arg ip)" dev eth0
ip link set eth0 up
echo "skiff-vm: control plane starting at $(cut -d' ' -f1 /proc/uptime)s"
skiff up --agent=false --api-auth=false --nats-auth=false --nats-port 0 --listen 0.0.0.0:6443 \
	--data-dir /data/skiff --fsync="$(arg fsync)" &
wait $!
echo "skiff-vm: skiff up exited with $?"
poweroff -f
`

const (
	powerCutWrites  = 300 // acknowledged creates before the power cut
	powerCutWriters = 8
)

// The control plane in a VM under a write load loses power (qemu killed: the guest's page
// cache is gone, what it flushed is on the virtual disk) and boots again: every write the API
// acknowledged is there. SKIFF_VM_POWERCUT_FSYNC=false runs it with skiff up --fsync=false,
// to see the loss that durable acknowledgement prevents.
func TestPowerCutKeepsAcknowledgedWrites(t *testing.T) {
	k := vmKernel(t)
	fsync := "true"
	if os.Getenv("SKIFF_VM_POWERCUT_FSYNC") == "false" {
		fsync = "false"
	}
	dir := t.TempDir()
	initrd, disk := buildControlPlaneImage(t, k, dir)
	hn, err := qemuvm.NewHostNet()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hn.Close)
	tap, mac, err := hn.Tap(1)
	if err != nil {
		t.Fatal(err)
	}
	api := "http://" + hn.IP(1) + ":6443"
	boot := func(n int) *qemuvm.VM {
		vm, err := qemuvm.Start(qemuvm.Config{Kernel: k.Image, Initrd: initrd, Tap: tap, MAC: mac, Disk: disk,
			Log: filepath.Join(dir, fmt.Sprintf("boot%d.log", n)), MemoryMB: 1536,
			Cmdline: cmdline(map[string]string{"ip": hn.IP(1) + "/24", "fsync": fsync})})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("console of boot %d (last 40 lines):\n%s", n, vm.Tail(40))
			}
			vm.Kill()
		})
		t0 := time.Now()
		testutil.Eventually(t, 5*time.Minute, time.Second, func() error {
			if vm.Exited() {
				t.Fatalf("VM exited during boot %d", n)
			}
			return get(api + "/readyz")
		})
		t.Logf("boot %d: API ready %v after qemu started", n, time.Since(t0).Round(time.Second))
		return vm
	}

	vm := boot(1)
	acked := writeUntilPowerCut(t, api, vm)
	t.Logf("power cut (kill -9 of qemu) after %d acknowledged creates", len(acked))
	if len(acked) == 0 {
		t.Fatal("no write was acknowledged before the power cut")
	}

	boot(2)
	names, err := listConfigMaps(api)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	var lost []string
	for name := range acked {
		if names[name] {
			found++
		} else {
			lost = append(lost, name)
		}
	}
	t.Logf("fsync=%s: acknowledged %d, found after reboot %d", fsync, len(acked), found)
	if found != len(acked) {
		if len(lost) > 5 {
			lost = lost[:5]
		}
		t.Fatalf("%d acknowledged writes lost in the power cut, e.g. %s", len(acked)-found, strings.Join(lost, ", "))
	}
}

// writeUntilPowerCut creates ConfigMaps from several writers until powerCutWrites were
// acknowledged (201), kills the VM while they are still writing, and returns the names
// acknowledged before.
func writeUntilPowerCut(t *testing.T, api string, vm *qemuvm.VM) map[string]bool {
	var mu sync.Mutex
	acked := map[string]bool{}
	cut := make(chan struct{})
	enough := make(chan struct{})
	client := &http.Client{Timeout: 30 * time.Second}
	var wg sync.WaitGroup
	for w := range powerCutWriters {
		wg.Go(func() {
			for i := 0; ; i++ {
				name := fmt.Sprintf("pc-%d-%d", w, i)
				err := create(client, api, name)
				select {
				case <-cut:
					return // an answer that raced the cut is not counted either way
				default:
				}
				if err != nil {
					t.Errorf("create %s before the power cut: %v", name, err)
					return
				}
				mu.Lock()
				acked[name] = true
				if len(acked) == powerCutWrites {
					close(enough)
				}
				mu.Unlock()
			}
		})
	}
	select {
	case <-enough:
	case <-time.After(5 * time.Minute):
		mu.Lock()
		t.Errorf("only %d creates acknowledged in 5 minutes", len(acked))
		mu.Unlock()
	}
	close(cut) // answers from here on are not counted: they may come after qemu died
	vm.Kill()
	wg.Wait()
	return acked
}

func create(c *http.Client, api, name string) error {
	body, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]string{"name": name}, "data": map[string]string{"v": name}})
	resp, err := c.Post(api+"/api/v1/namespaces/default/configmaps", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

func get(url string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}

func listConfigMaps(api string) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, api+"/api/v1/namespaces/default/configmaps", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list struct {
		Items []struct {
			Metadata struct{ Name string } `json:"metadata"`
		} `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, it := range list.Items {
		names[it.Metadata.Name] = true
	}
	return names, nil
}

// buildControlPlaneImage writes the control-plane VM's initramfs and an empty ext4 disk.
func buildControlPlaneImage(t *testing.T, k qemuvm.Kernel, dir string) (initrd, disk string) {
	t.Helper()
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		needs.Skip(t, "mkfs.ext4 not installed (apt-get install e2fsprogs)")
	}
	r, err := qemuvm.NewBusybox()
	if err != nil {
		t.Fatal(err)
	}
	r.File("/init", 0o755, []byte(cpInit))
	order, err := r.Modules(k.Modules, k.Version, cpModules...)
	if err != nil {
		t.Fatal(err)
	}
	r.File("/etc/skiff/modules", 0o644, []byte(strings.Join(order, "\n")+"\n"))
	if err := r.Binary("/usr/local/bin/skiff", testutil.BuildBinary(t, "./services/skiff")); err != nil {
		t.Fatal(err)
	}
	initrd = filepath.Join(dir, "cp-initramfs.cpio")
	if err := r.Write(initrd); err != nil {
		t.Fatal(err)
	}
	disk = filepath.Join(dir, "data.img")
	if err := os.WriteFile(disk, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(disk, 1<<30); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(mkfs, "-q", "-F", disk).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	return initrd, disk
}
