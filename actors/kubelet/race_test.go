//go:build race

package kubelet_test

import "github.com/sasha-s/go-deadlock"

// Under -race go-cni swaps its mutex for go-deadlock's, whose goroutine-id lookup reads 0 for
// every goroutine on this Go version: two pods' concurrent CNI setups then look like one
// goroutine taking a read lock twice and abort the test. The detector is a debugging aid of
// that library, not part of what is tested here.
func init() { deadlock.Opts.Disable = true }
