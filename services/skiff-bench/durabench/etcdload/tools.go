//go:build tools

// The etcd server the benchmark runs is built from this module's requirements.
package main

import _ "go.etcd.io/etcd/server/v3"
