#!/usr/bin/env bash
# Builds the compose stack's images FROM scratch, with nothing pulled: skiff (the control plane
# and the NATS servers), skiff-agent (a node: skiff + containerd + runc + CNI plugins + iptables,
# shared libraries copied from this machine) and jaeger (built from its Go module).
#
#   deploy/docker/build.sh [OUT_DIR]     (default ./bin/compose)
#
# Needs docker, Go, and the node runtime .ci/deps/node.sh installs (containerd, the runc shim
# and the CNI plugins are copied from PATH and /opt/cni/bin; runc and iptables from Debian).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/bin/compose}"
JAEGER_VERSION=v1.76.0
CNI_BIN_DIR=${CNI_BIN_DIR:-/opt/cni/bin}
TAG=${SKIFF_IMAGE_TAG:-dev}
IMAGES=${SKIFF_COMPOSE_IMAGES:-skiff agent jaeger} # a subset rebuilds only those

mkdir -p "$out"
out="$(cd "$out" && pwd)"

# libs FILE: the shared libraries FILE loads (and the dynamic loader), one path a line.
libs() {
	ldd "$1" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'
}

# copy_with_libs ROOTFS FILE...: each file at its own path under ROOTFS, with its shared
# libraries, so a FROM scratch image can run it.
copy_with_libs() {
	local rootfs=$1
	shift
	local f lib
	for f in "$@"; do
		[ -e "$rootfs$f" ] || install -D -m 0755 "$(readlink -f "$f")" "$rootfs$f"
		for lib in $(libs "$f"); do
			[ -e "$rootfs$lib" ] || install -D -m 0755 "$(readlink -f "$lib")" "$rootfs$lib"
		done
	done
}

need() {
	command -v "$1" >/dev/null 2>&1 || {
		echo "build.sh: $1 not found ($2)" >&2
		exit 1
	}
}
need docker "bash .ci/deps/docker.sh"
for b in containerd containerd-shim-runc-v2 runc; do need "$b" "bash .ci/deps/node.sh"; done
need xtables-nft-multi "apt-get install iptables"
for p in bridge host-local loopback portmap firewall; do
	[ -x "$CNI_BIN_DIR/$p" ] || {
		echo "build.sh: CNI plugin $CNI_BIN_DIR/$p missing (bash .ci/deps/node.sh)" >&2
		exit 1
	}
done

echo "== skiff (static)"
(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$out/skiff" ./services/skiff)
(cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$out/httpecho" ./deploy/images/httpecho)
(cd "$root" && go run ./services/skiff-image-build -o "$out/httpecho.tar" -name skiff.local/httpecho:v1 -binary "$out/httpecho" -port 8080)

# Kept outside the work tree: a fresh clone (CI) reuses it instead of compiling Jaeger again.
cache="${XDG_CACHE_HOME:-$HOME/.cache}/skiff"
jaeger="$cache/jaeger-$JAEGER_VERSION"
if [[ " $IMAGES " == *" jaeger "* && ! -x "$jaeger" ]]; then
	echo "== jaeger $JAEGER_VERSION"
	# A throwaway module: jaeger's go.mod has a replace directive, so `go install pkg@version`
	# refuses it, and its dependencies must stay out of this repo's go.mod.
	mkdir -p "$cache"
	mod="$(mktemp -d)"
	trap 'rm -rf "$mod"' EXIT
	cat >"$mod/go.mod" <<-EOF
		module jaegerbuild

		go 1.26

		replace github.com/Shopify/sarama => github.com/Shopify/sarama v1.33.0
	EOF
	printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/jaegertracing/jaeger/cmd/jaeger"\n' >"$mod/tools.go"
	(cd "$mod" && go get "github.com/jaegertracing/jaeger/cmd/jaeger@$JAEGER_VERSION" &&
		CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$jaeger" github.com/jaegertracing/jaeger/cmd/jaeger)
fi

stage() { # stage NAME: a fresh build context $out/ctx/NAME with an empty rootfs
	rm -rf "$out/ctx/$1"
	mkdir -p "$out/ctx/$1/rootfs"/{tmp,data,etc}
	chmod 1777 "$out/ctx/$1/rootfs/tmp"
	printf 'root:x:0:0:root:/:/usr/local/bin/skiff\nnobody:x:65534:65534:nobody:/:/nonexistent\n' >"$out/ctx/$1/rootfs/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$out/ctx/$1/rootfs/etc/group"
	cp "$here/$1.Dockerfile" "$out/ctx/$1/Dockerfile"
	echo "$out/ctx/$1/rootfs"
}

r="$(stage skiff)"
install -D -m 0755 "$out/skiff" "$r/usr/local/bin/skiff"

r="$(stage agent)"
install -D -m 0755 "$out/skiff" "$r/usr/local/bin/skiff"
for b in containerd containerd-shim-runc-v2 runc; do
	copy_with_libs "$r" "$(command -v "$b")"
	# The agent finds them on PATH: keep them in /usr/local/bin whatever the host's layout.
	[ -e "$r/usr/local/bin/$b" ] || ln -s "$(command -v "$b")" "$r/usr/local/bin/$b"
done
for p in bridge host-local loopback portmap firewall; do
	install -D -m 0755 "$CNI_BIN_DIR/$p" "$r/opt/cni/bin/$p"
done
# iptables (nf_tables backend) for the bridge plugin's masquerade and portmap: the multi-call
# binary, its names, and the match/target modules it loads at run time.
copy_with_libs "$r" "$(command -v xtables-nft-multi)"
nft="$(command -v xtables-nft-multi)"
for n in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
	ln -sf "$(basename "$nft")" "$r$(dirname "$nft")/$n"
done
xt="$(readlink -f "$(dirname "$(libs "$nft" | grep libxtables)")/xtables")"
copy_with_libs "$r" "$xt"/*.so
install -D -m 0644 "$out/httpecho.tar" "$r/images/httpecho.tar"
mkdir -p "$r/run" "$r/var/lib" "$r/sys/fs/bpf"

if [[ " $IMAGES " == *" jaeger "* ]]; then
	r="$(stage jaeger)"
	install -D -m 0755 "$jaeger" "$r/jaeger"
fi

for img in $IMAGES; do
	name="skiff-$img"
	[ "$img" = skiff ] && name=skiff
	echo "== image $name:$TAG"
	docker build -q -t "$name:$TAG" "$out/ctx/$img"
done
# A rebuild leaves the previous images untagged: drop those of this stack only.
docker image prune -f --filter label=sh.skiff.compose=1 >/dev/null
