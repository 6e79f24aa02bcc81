package lbbench

import (
	"net/netip"
)

// The synthetic cluster both dataplanes get: n TCP Services on port 80 with
// ClusterIPs counting up from 10.96.0.1, each with the same b loopback
// backends (so every ClusterIP is reachable through one listener set).
const (
	vipCIDR     = "10.96.0.0/12"
	svcPort     = 80
	backendPort = 8080
)

func vipOf(i int) netip.Addr {
	v := 10<<24 | 96<<16 | uint32(i+1)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// backendsOf lists service i's backends; changed swaps service i's first
// backend for a spare one (the "one endpoint change").
func backendsOf(b int, changed bool) []netip.AddrPort {
	out := make([]netip.AddrPort, b)
	for j := range b {
		out[j] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, byte(2 + j)}), backendPort)
	}
	if changed {
		out[0] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, byte(2 + b)}), backendPort)
	}
	return out
}
