#!/usr/bin/env bash
# A new user's first minutes, on this machine: clone the repository into a temp dir, run README
# command 1 (`go run ./services/skiff up`) as root in the background, apply the demo with the
# command it prints and wait until deploy/examples/web.yaml answers HTTP through its ClusterIP.
# Nothing else is installed or built first; runc is the one host package, installed the way
# skiff up says when missing. Prints the elapsed times. The Go caches are the caller's (warm in
# CI after the test run); HOME is a fresh one, so skiff's data dir is new.
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
export PATH="$PATH:/usr/local/go/bin"
export GOCACHE="$(go env GOCACHE)" GOMODCACHE="$(go env GOMODCACHE)" GOPATH="$(go env GOPATH)"
tmp="$(mktemp -d)"
export HOME="$tmp/home"
mkdir -p "$HOME"
log="$tmp/up.log"
pgid=""
cleanup() {
	if [ -n "$pgid" ]; then
		# Remove the demo first: pods outlive skiff (they run in containerd's shims).
		(cd "$tmp/skiff" && timeout 60 go run ./services/skiff delete -f deploy/examples/web.yaml >/dev/null 2>&1) || true
		for _ in $(seq 30); do
			(cd "$tmp/skiff" && go run ./services/skiff get pods 2>/dev/null | grep -q web-) || break
			sleep 1
		done
		kill -INT -- "-$pgid" 2>/dev/null || true
		for _ in $(seq 30); do kill -0 -- "-$pgid" 2>/dev/null || break; sleep 1; done
		kill -KILL -- "-$pgid" 2>/dev/null || true
	fi
	ip link del skiff0 2>/dev/null || true
	# The node's eBPF programs stay pinned across restarts by design; this node is gone for good,
	# and later steps on this host must not meet its Service maps.
	rm -rf "/sys/fs/bpf/skiff/$(hostname)" "/sys/fs/bpf/skiff-netpol/$(hostname)"
	rm -rf "$tmp"
}
trap cleanup EXIT

command -v runc >/dev/null || { echo "runc missing: apt-get install -y runc (as skiff up says)"; apt-get install -y runc >/dev/null; }

git clone --quiet "$src" "$tmp/skiff"
cd "$tmp/skiff"
start=$(date +%s.%N)
elapsed() { printf '%.1f' "$(echo "$(date +%s.%N) - $start" | bc)"; }
setsid go run ./services/skiff up >"$log" 2>&1 &
pgid=$!
for _ in $(seq 1200); do
	grep -q '^skiff is up' "$log" && break
	kill -0 "$pgid" 2>/dev/null || { cat "$log"; echo "clone-and-serve: skiff up exited"; exit 1; }
	sleep 0.25
done
grep -q '^skiff is up' "$log" || { tail -40 "$log"; echo "clone-and-serve: skiff up did not come up in 5 min"; exit 1; }
up_at=$(elapsed)
if grep -q 'running without a node agent' "$log"; then
	grep 'running without a node agent' "$log"
	exit 1
fi
# The commands skiff up printed, as a user would paste them.
apply=$(grep -m1 -- 'apply -f deploy/examples/web.yaml' "$log" | sed 's/^ *//')
[ -n "$apply" ] || { cat "$log"; echo "clone-and-serve: skiff up printed no apply command"; exit 1; }
$apply
ip=""
for _ in $(seq 60); do
	ip=$(go run ./services/skiff get svc web -o yaml 2>/dev/null | awk '$1 == "clusterIP:" {print $2}')
	[ -n "$ip" ] && break
	sleep 1
done
[ -n "$ip" ] || { echo "clone-and-serve: service web has no ClusterIP"; exit 1; }
# Plain bash (/dev/tcp), so no HTTP client is needed either.
get() { timeout 3 bash -c "exec 3<>/dev/tcp/$ip/80 && printf 'GET / HTTP/1.0\r\nHost: web\r\n\r\n' >&3 && cat <&3" 2>/dev/null; }
for _ in $(seq 240); do
	if reply=$(get) && grep -q '^HTTP/1.[01] 200' <<<"$reply"; then
		echo "clone-and-serve: skiff up in ${up_at}s (compile + start), web.yaml serving through ClusterIP $ip after $(elapsed)s"
		tail -1 <<<"$reply"
		exit 0
	fi
	sleep 0.5
done
go run ./services/skiff get pods -o wide || true
tail -40 "$log"
echo "clone-and-serve: web did not answer on $ip within 2 min of the apply"
exit 1
