// Package policy loads the NetworkPolicy eBPF programs (bpf/netpol.c), attaches them to the
// host side of pods' veths (tcx links, or legacy tc filters before Linux 6.6: bpf/tcattach),
// and reads and writes their pinned maps: which pods are isolated in which direction, the
// peers and ports each may reach or be reached from, and the connection tracking table.
package policy

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Direction is a policy direction, as the pod sees it.
type Direction uint8

const (
	Ingress Direction = 0 // traffic to the pod
	Egress  Direction = 1 // traffic from the pod
)

func (d Direction) String() string {
	if d == Egress {
		return "egress"
	}
	return "ingress"
}

// MaxPorts is how many port ranges one peer prefix of one pod may carry.
const MaxPorts = 16

// Protocol numbers of PortRange.Proto (0: any protocol, any port).
const (
	ProtoAny  uint8 = 0
	ProtoTCP  uint8 = 6
	ProtoUDP  uint8 = 17
	ProtoSCTP uint8 = 132
)

// PortRange allows the destination ports Lo..Hi of Proto; Proto 0 allows everything.
type PortRange struct {
	Proto  uint8
	Lo, Hi uint16
}

func (p PortRange) String() string {
	name := map[uint8]string{ProtoTCP: "TCP", ProtoUDP: "UDP", ProtoSCTP: "SCTP"}[p.Proto]
	switch {
	case p.Proto == ProtoAny:
		return "any"
	case p.Lo == p.Hi:
		return fmt.Sprintf("%s/%d", name, p.Lo)
	}
	return fmt.Sprintf("%s/%d-%d", name, p.Lo, p.Hi)
}

// RuleKey names the allowed ports of one pod toward (or from) one peer prefix.
type RuleKey struct {
	Pod  netip.Addr // IPv4
	Dir  Direction
	Peer netip.Prefix // IPv4
}

// Endpoint is a local pod's isolation: the directions some policy selects it for.
type Endpoint struct {
	Ingress, Egress bool
}

func be32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.NativeEndian.Uint32(b[:]) // the map holds network byte order
}

func addrOf(v uint32) netip.Addr {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

func ruleKey(k RuleKey) (netpolRuleKey, error) {
	if !k.Pod.Is4() || !k.Peer.Addr().Is4() {
		return netpolRuleKey{}, fmt.Errorf("policy: rule %v: IPv4 only", k)
	}
	p := k.Peer.Masked()
	return netpolRuleKey{Prefixlen: uint32(64 + p.Bits()), Pod: be32(k.Pod), Dir: uint8(k.Dir), Peer: be32(p.Addr())}, nil
}

func fromRuleKey(k netpolRuleKey) RuleKey {
	return RuleKey{Pod: addrOf(k.Pod), Dir: Direction(k.Dir), Peer: netip.PrefixFrom(addrOf(k.Peer), int(k.Prefixlen)-64)}
}

func ruleVal(ports []PortRange) (netpolRuleVal, error) {
	var v netpolRuleVal
	if len(ports) > MaxPorts {
		return v, fmt.Errorf("policy: %d port ranges toward one peer; at most %d", len(ports), MaxPorts)
	}
	v.Count = uint32(len(ports))
	for i, p := range ports {
		v.Ports[i] = netpolPortRange{Proto: p.Proto, Lo: p.Lo, Hi: p.Hi}
	}
	return v, nil
}

func fromRuleVal(v netpolRuleVal) []PortRange {
	out := make([]PortRange, 0, v.Count)
	for _, p := range v.Ports[:min(int(v.Count), MaxPorts)] {
		out = append(out, PortRange{Proto: p.Proto, Lo: p.Lo, Hi: p.Hi})
	}
	return out
}
