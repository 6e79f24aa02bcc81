// Package vm runs Skiff's end-to-end suite against Linux VMs: the control plane runs in the
// test process on the host, and each node is a qemu VM (TCG) booted from a kernel and an
// initramfs the suite builds (busybox, kernel modules, containerd, runc, CNI plugins, the
// skiff agent), on a host bridge. The power-cut test runs the control plane itself in a VM,
// its data on a virtio disk. It needs root, qemu and the packages .ci/deps/vm.sh
// installs, and runs only with SKIFF_E2E_VM=1 (`go tool task e2e:vm`): booting VMs under
// emulation takes minutes.
package vm
