// Package e2e holds Skiff's end-to-end tests: a whole control plane and real node agents
// (containerd + runc, CNI networking, eBPF Service routing) on this machine. They need root and
// the node binaries that .ci/deps/node.sh installs, and skip with the reason otherwise.
//
// The netns_* tests run a multi-node cluster (testkit/netnscluster): each node a
// `skiff agent` process in its own network namespace, cgroup2 subtree and containerd, joined
// by a host bridge, with the control plane in the test process. They cover pod-to-pod and
// Service traffic across nodes and the fault scenarios, each logging its measured recovery
// time: a killed node agent, a partitioned node, a killed scheduler leader, a killed NATS
// server (acknowledged writes counted against those found), and a restart of everything.
//
// The up_* test runs the real `skiff up` process (control plane and node agent in one) in a
// cgroup subtree of its own, and restarts it under a Service load from a client in that subtree.
package e2e
