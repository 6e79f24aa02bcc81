#!/usr/bin/env bash
# Starts Skiff in a scratch data dir, applies the example manifest, shows what the API holds,
# restarts Skiff to show the state survives, and stops.
set -euo pipefail
bin=${1:-bin}
dir=$(mktemp -d)
port=${SKIFF_DEMO_PORT:-16443}
# skiff up serves HTTPS with authentication and writes the admin kubeconfig into its data dir.
export KUBECONFIG=$dir/kubeconfig
start() {
  "$bin/skiff" up --data-dir "$dir" --listen 127.0.0.1:$port --nats-port 0 2>"$dir/up.log" &
  pid=$!
  for _ in $(seq 100); do "$bin/skiff" version >/dev/null 2>&1 && return; sleep 0.1; done
  cat "$dir/up.log"; exit 1
}
trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
start
"$bin/skiff" apply -f "$(dirname "$0")/examples/web.yaml"
"$bin/skiff" get deploy,svc
"$bin/skiff" get deploy,svc -o yaml | grep -E '^  (kind|  name|  resourceVersion):'
kill $pid; wait $pid 2>/dev/null || true
echo "-- restarted --"
start
"$bin/skiff" get deploy,svc
