#!/usr/bin/env bash
# Docker for the compose stack (deploy/compose.yaml): Debian's docker.io daemon and
# docker-compose, started in the background when no daemon answers, then waited for until
# `docker info` works. Idempotent; run as root.
# No image is ever pulled: every image of the stack is built FROM scratch by deploy/docker/build.sh.
set -euo pipefail

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v docker-compose >/dev/null 2>&1 || docker compose version >/dev/null 2>&1 || need+=(docker-compose)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
if [ ${#need[@]} -gt 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq || true
	apt-get install -y --no-install-recommends "${need[@]}"
fi

if docker info >/dev/null 2>&1; then
	exit 0
fi
# dockerd starts its own containerd from PATH: give it Debian's (the one docker.io was built
# against), not a newer one that .ci/deps/node.sh may have put in /usr/local/bin.
log=/var/log/skiff-dockerd.log
PATH=/usr/sbin:/usr/bin:/sbin:/bin nohup dockerd >"$log" 2>&1 </dev/null &
for _ in $(seq 1 60); do
	if docker info >/dev/null 2>&1; then
		exit 0
	fi
	sleep 1
done
# Not fatal: .ci/run runs the compose test only where `docker info` answers.
echo "WARNING: dockerd did not answer within 60s; the compose stack cannot run here. Its log ($log):" >&2
tail -n 30 "$log" >&2
