#!/usr/bin/env bash
# What the tests need on a node beyond the skiff binary (which carries containerd, the runc
# shim and the CNI plugins): runc, iproute2, iptables and nsenter from Debian. The kubelet's
# tests (actors/kubelet/kubelettest), the compose images (deploy/docker/build.sh) and the VM
# suite's initramfs (e2e/vm) still use a host containerd v2 daemon + runc shim (built with go
# install, no btrfs headers needed) and the CNI plugins in /opt/cni/bin, so those are
# installed too. Idempotent; run as root.
set -euo pipefail

CONTAINERD_VERSION=v2.4.2
CNI_PLUGINS_VERSION=v1.10.0
CNI_BIN_DIR=/opt/cni/bin

need=()
command -v runc >/dev/null 2>&1 || need+=(runc)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
# The CNI bridge's masquerade and the agent's pod-CIDR rules; nsenter runs netns e2e nodes.
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
if [ ${#need[@]} -gt 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update
	apt-get install -y --no-install-recommends "${need[@]}"
fi

gobin="$(mktemp -d)"
trap 'rm -rf "$gobin"' EXIT

have_containerd() {
	command -v containerd >/dev/null 2>&1 &&
		containerd --version 2>/dev/null | grep -q " ${CONTAINERD_VERSION} "
}
if ! have_containerd || ! command -v containerd-shim-runc-v2 >/dev/null 2>&1; then
	GOBIN="$gobin" go install -tags no_btrfs \
		"github.com/containerd/containerd/v2/cmd/containerd@${CONTAINERD_VERSION}" \
		"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@${CONTAINERD_VERSION}"
	install -m 0755 "$gobin/containerd" "$gobin/containerd-shim-runc-v2" /usr/local/bin/
fi

mkdir -p "$CNI_BIN_DIR"
missing=()
for p in bridge host-local loopback portmap firewall; do
	[ -x "$CNI_BIN_DIR/$p" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	mods=()
	for p in "${missing[@]}"; do
		case "$p" in
		bridge | loopback) mods+=("github.com/containernetworking/plugins/plugins/main/$p@${CNI_PLUGINS_VERSION}") ;;
		host-local) mods+=("github.com/containernetworking/plugins/plugins/ipam/$p@${CNI_PLUGINS_VERSION}") ;;
		portmap | firewall) mods+=("github.com/containernetworking/plugins/plugins/meta/$p@${CNI_PLUGINS_VERSION}") ;;
		esac
	done
	GOBIN="$gobin" CGO_ENABLED=0 go install "${mods[@]}"
	for p in "${missing[@]}"; do
		install -m 0755 "$gobin/$p" "$CNI_BIN_DIR/$p"
	done
fi
