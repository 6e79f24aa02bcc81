//go:build race

package kubeletbench

import "github.com/sasha-s/go-deadlock"

// See actors/kubelet/race_test.go: go-cni's race-build deadlock detector misreads goroutine
// ids on this Go version and aborts on concurrent CNI setups.
func init() { deadlock.Opts.Disable = true }
