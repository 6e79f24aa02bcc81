// Package lb programs Skiff's socket-level Service load balancer: eBPF
// cgroup hooks that rewrite connect()/sendmsg() to a Service VIP into a
// backend address, plus the maps that describe the Services.
package lb

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// Proto is the L4 protocol of a Service port; values are IP protocol numbers.
type Proto uint8

const (
	TCP Proto = 6
	UDP Proto = 17
)

func (p Proto) String() string {
	switch p {
	case TCP:
		return "TCP"
	case UDP:
		return "UDP"
	}
	return fmt.Sprintf("proto(%d)", uint8(p))
}

// ServiceKey names one Service port: ClusterIP, port and protocol.
type ServiceKey struct {
	VIP   netip.Addr
	Port  uint16
	Proto Proto
}

func (k ServiceKey) String() string {
	return fmt.Sprintf("%s/%s", netip.AddrPortFrom(k.VIP, k.Port), k.Proto)
}

// Backend is one ready endpoint of a Service port.
type Backend struct {
	Addr netip.Addr
	Port uint16
}

func (b Backend) String() string { return netip.AddrPortFrom(b.Addr, b.Port).String() }

// ServiceSpec is the desired state of one Service port.
type ServiceSpec struct {
	Backends []Backend
	// AffinityTimeout enables ClientIP session affinity (the client is the
	// caller's network namespace); 0 disables it. Rounded up to seconds.
	AffinityTimeout time.Duration
}

// Stats counts map entries touched by one call.
type Stats struct {
	ServiceWrites, BackendWrites, BackendDeletes int
}

// ServiceDump is one Service as the kernel maps hold it.
type ServiceDump struct {
	Key             ServiceKey
	Rev             uint32 // slot generation currently serving the Service
	Backends        []Backend
	AffinityTimeout time.Duration
}

// Options sizes the maps; zero fields take the defaults.
type Options struct {
	MaxServices uint32 // Service ports (default 65536)
	// MaxBackends bounds backend slots summed over all Services, plus the
	// largest single Service (its new slots coexist with the old ones while
	// it switches). Default 262144.
	MaxBackends     uint32
	AffinityEntries uint32 // LRU of ClientIP affinity entries (default 65536)
	SocketEntries   uint32 // LRU of UDP per-socket entries (default 65536)
	// PinPath is a directory on a bpffs. When set, the maps and the cgroup
	// links are pinned there, and a later Load with the same PinPath reuses
	// them (the map sizes must then be the same), so a restarted proxy
	// never leaves a window without Services.
	PinPath string
}

func (o Options) withDefaults() Options {
	def := func(v *uint32, d uint32) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.MaxServices, 65536)
	def(&o.MaxBackends, 262144)
	def(&o.AffinityEntries, 65536)
	def(&o.SocketEntries, 65536)
	return o
}

// addr16 encodes a as the 16 bytes the maps use (IPv4 as IPv4-mapped), as the
// native-endian words the generated structs hold, so memory order is network order.
func addr16(a netip.Addr) [4]uint32 {
	b := a.As16()
	var w [4]uint32
	for i := range w {
		w[i] = binary.NativeEndian.Uint32(b[i*4:])
	}
	return w
}

func addrFrom16(w [4]uint32) netip.Addr {
	var b [16]byte
	for i := range w {
		binary.NativeEndian.PutUint32(b[i*4:], w[i])
	}
	return netip.AddrFrom16(b).Unmap()
}

// PortToNet stores p so that its bytes in memory are in network order, as the maps hold ports.
func PortToNet(p uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], p)
	return binary.NativeEndian.Uint16(b[:])
}

// PortFromNet reads a port the maps hold.
func PortFromNet(p uint16) uint16 {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], p)
	return binary.BigEndian.Uint16(b[:])
}

func (k ServiceKey) raw() sockLbSvcKey {
	return sockLbSvcKey{Addr: addr16(k.VIP), Port: PortToNet(k.Port), Proto: uint8(k.Proto)}
}

func keyFromRaw(r sockLbSvcKey) ServiceKey {
	return ServiceKey{VIP: addrFrom16(r.Addr), Port: PortFromNet(r.Port), Proto: Proto(r.Proto)}
}

func (b Backend) raw() sockLbBackend {
	return sockLbBackend{Addr: addr16(b.Addr), Port: PortToNet(b.Port)}
}

func backendFromRaw(r sockLbBackend) Backend {
	return Backend{Addr: addrFrom16(r.Addr), Port: PortFromNet(r.Port)}
}

func (k ServiceKey) validate() error {
	if !k.VIP.IsValid() || k.VIP.Zone() != "" {
		return fmt.Errorf("service %v: invalid VIP", k)
	}
	if k.Port == 0 {
		return fmt.Errorf("service %v: port must be non-zero", k)
	}
	if k.Proto != TCP && k.Proto != UDP {
		return fmt.Errorf("service %v: protocol must be TCP or UDP", k)
	}
	return nil
}

// normalize validates s against k and returns its backends sorted and
// de-duplicated (a set), so equal sets compare equal whatever their order.
func normalize(k ServiceKey, s ServiceSpec) ([]Backend, uint32, error) {
	if err := k.validate(); err != nil {
		return nil, 0, err
	}
	if s.AffinityTimeout < 0 {
		return nil, 0, fmt.Errorf("service %v: negative affinity timeout", k)
	}
	v4 := k.VIP.Unmap().Is4()
	out := make([]Backend, 0, len(s.Backends))
	for _, b := range s.Backends {
		if !b.Addr.IsValid() || b.Port == 0 {
			return nil, 0, fmt.Errorf("service %v: invalid backend %v", k, b)
		}
		if b.Addr.Unmap().Is4() != v4 {
			return nil, 0, fmt.Errorf("service %v: backend %v is of another address family", k, b)
		}
		out = append(out, Backend{Addr: b.Addr.Unmap(), Port: b.Port})
	}
	slices.SortFunc(out, func(a, b Backend) int {
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c
		}
		return int(a.Port) - int(b.Port)
	})
	out = slices.Compact(out)
	secs := uint32((s.AffinityTimeout + time.Second - 1) / time.Second)
	return out, secs, nil
}
