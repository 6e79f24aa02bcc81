#!/usr/bin/env bash
# VM e2e (e2e/vm): qemu to boot nodes under TCG, a Debian kernel with its modules
# (/boot/vmlinuz-* + /lib/modules/*), static busybox for the initramfs userland and
# iptables (legacy backend) for the CNI bridge plugin's masquerading, e2fsprogs for the
# power-cut test's disk. The node binaries themselves come from node.sh. Idempotent; run as root.
set -euo pipefail

need=()
command -v qemu-system-x86_64 >/dev/null 2>&1 || need+=(qemu-system-x86)
ls /boot/vmlinuz-* >/dev/null 2>&1 || need+=(linux-image-amd64)
# busybox-static's binary is /bin/busybox (it replaces the dynamic busybox package).
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
command -v xtables-legacy-multi >/dev/null 2>&1 || need+=(iptables)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
# mkfs.ext4 for the power-cut test's virtio disk.
command -v mkfs.ext4 >/dev/null 2>&1 || need+=(e2fsprogs)
if [ ${#need[@]} -gt 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update
	apt-get install -y --no-install-recommends "${need[@]}"
fi
