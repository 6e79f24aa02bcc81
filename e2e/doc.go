// Package e2e holds Skiff's end-to-end tests: a whole control plane and real node agents
// (containerd + runc, CNI networking, eBPF Service routing) on this machine. They need root and
// the node binaries that .ci/deps/node.sh installs, and skip with the reason otherwise.
package e2e
