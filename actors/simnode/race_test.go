//go:build race

package simnode_test

import "time"

// The race detector slows the apiserver about threefold and CI runs other packages beside this
// one: 100 nodes renewing every 500 ms (200 writes/s) leave headroom on two cores, and a 2 s
// lease tolerates a stalled second. The non-race run carries the real load.
const (
	defaultNodes    = 100
	defaultRenewMS  = 500
	defaultDuration = 2 * time.Second
)
