//go:build !race

package simnode_test

import "time"

const (
	defaultNodes    = 300
	defaultRenewMS  = 200
	defaultDuration = time.Second
)
