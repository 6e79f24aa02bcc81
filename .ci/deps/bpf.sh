#!/usr/bin/env bash
# System packages for bpf/: clang+llvm+libbpf headers to regenerate the eBPF
# objects (go generate ./bpf/...), iptables for the lbbench comparison peer,
# iproute2 for the benchmark's network namespace.
set -euo pipefail
need=()
command -v clang >/dev/null 2>&1 || need+=(clang)
command -v llvm-strip >/dev/null 2>&1 || need+=(llvm)
[ -f /usr/include/bpf/bpf_helpers.h ] || need+=(libbpf-dev)
[ -f /usr/include/linux/bpf.h ] || need+=(linux-libc-dev)
command -v iptables-restore >/dev/null 2>&1 || need+=(iptables)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
if [ ${#need[@]} -gt 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update
	apt-get install -y --no-install-recommends "${need[@]}"
fi
