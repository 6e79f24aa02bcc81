//go:build ignore

// NetworkPolicy enforcement on the host side of each pod's veth (tcx).
//
// "from_pod" runs at the veth's tcx ingress (a packet the pod sent: its
// egress), "to_pod" at the veth's tcx egress (a packet for the pod: its
// ingress). The local pod is the packet's source or destination IPv4 address;
// a pod no policy isolates in that direction is not in `endpoints` (or lacks
// the direction's flag) and passes.
//
// Allowed peers are an LPM trie keyed by (pod, direction, peer prefix): user
// space writes, for every prefix a rule names, the union of the ports every
// rule covering that prefix allows, so the longest match alone decides (an
// ipBlock's except is a longer prefix carrying the other rules' ports only).
//
// Every flow is tracked per (5-tuple, direction) once any check let it
// through, whether or not a policy isolated the pod then: a reply is matched
// against the reverse tuple of the other direction, and a policy written
// later does not cut a connection that was already established. A TCP SYN
// without ACK is always checked again, so a reused 5-tuple is a new
// connection.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "packet.h"

#define TCX_NEXT -1
#define TCX_DROP 2

#define DIR_INGRESS 0
#define DIR_EGRESS 1
#define EP_INGRESS (1 << DIR_INGRESS)
#define EP_EGRESS (1 << DIR_EGRESS)

#define MAX_PORTS 16
#define NSEC_PER_SEC 1000000000ULL
#define CT_TCP_LIFETIME (6ULL * 3600 * NSEC_PER_SEC)
#define CT_OTHER_LIFETIME (60ULL * NSEC_PER_SEC)
#define CT_REFRESH NSEC_PER_SEC

char __license[] SEC("license") = "Dual MIT/GPL";

struct endpoint {
	__u32 flags; // EP_INGRESS, EP_EGRESS: isolated directions
};

// rule_key's prefixlen counts from pod: 64 bits of (pod, dir, pad) plus the
// peer prefix's length.
struct rule_key {
	__u32 prefixlen;
	__be32 pod;
	__u8 dir;
	__u8 pad[3];
	__be32 peer;
};

// port_range allows proto's ports lo..hi (host order); proto 0 allows every
// protocol and port (a rule without ports).
struct port_range {
	__u8 proto;
	__u8 pad;
	__u16 lo;
	__u16 hi;
};

struct rule_val {
	__u32 count;
	struct port_range ports[MAX_PORTS];
};

struct ct_key {
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 dir;
	__u16 pad;
};

struct ct_val {
	__u64 seen; // bpf_ktime_get_ns of the last packet (refreshed each second)
};

// Counters, per CPU: what the checks decided.
enum {
	STAT_ALLOWED,    // a new flow a policy allowed
	STAT_DENIED,     // a packet no policy allowed (dropped)
	STAT_TRACKED,    // a packet of a tracked flow or its reply
	STAT_UNISOLATED, // a new flow of a direction no policy isolates
	STAT_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __be32);
	__type(value, struct endpoint);
} endpoints SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct rule_key);
	__type(value, struct rule_val);
} rules SEC(".maps");

// The node's own addresses: their traffic to a pod is always allowed
// (probes), as Kubernetes specifies.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __be32);
	__type(value, __u8);
} host_addrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 262144);
	__type(key, struct ct_key);
	__type(value, struct ct_val);
} conntrack SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline void count(__u32 what)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &what);
	if (v)
		*v += 1;
}

static __always_inline int ports_allow(const struct rule_val *r, __u8 proto, __u16 dport)
{
	__u32 n = r->count;
	for (__u32 i = 0; i < MAX_PORTS; i++) { // bounded: the verifier walks it
		if (i >= n)
			break;
		const struct port_range *p = &r->ports[i];
		if (p->proto == 0 || (p->proto == proto && dport >= p->lo && dport <= p->hi))
			return 1;
	}
	return 0;
}

static __always_inline int ct_live(struct ct_key *k, __u64 now)
{
	struct ct_val *v = bpf_map_lookup_elem(&conntrack, k);
	if (!v)
		return 0;
	__u64 life = k->proto == IPPROTO_TCP ? CT_TCP_LIFETIME : CT_OTHER_LIFETIME;
	if (now - v->seen > life)
		return 0;
	if (now - v->seen > CT_REFRESH)
		v->seen = now;
	return 1;
}

static __always_inline int check(struct __sk_buff *skb, __u8 dir)
{
	struct iphdr ip;
	int ret = load_ipv4(skb, &ip);
	if (ret > 0)
		return TCX_NEXT; // ARP; pods have no IPv6 address to police
	if (ret < 0)
		return TCX_DROP;
	struct ct_key fwd = {.saddr = ip.saddr, .daddr = ip.daddr, .proto = ip.protocol, .dir = dir};
	int syn = 0;
	int first = first_fragment(&ip);
	if (first && has_ports(&ip)) {
		__be16 ports[2];
		if (load_ports(skb, &ip, ports))
			return TCX_DROP;
		fwd.sport = ports[0];
		fwd.dport = ports[1];
		if (ip.protocol == IPPROTO_TCP) {
			__u8 flags;
			if (bpf_skb_load_bytes(skb, l4_offset(&ip) + 13, &flags, 1) < 0)
				return TCX_DROP;
			syn = (flags & 0x12) == 0x02; // SYN without ACK
		}
	}
	__u64 now = bpf_ktime_get_ns();
	struct ct_key rev = {.saddr = ip.daddr, .daddr = ip.saddr, .sport = fwd.dport, .dport = fwd.sport,
			     .proto = ip.protocol, .dir = dir ^ 1};
	if ((!syn && ct_live(&fwd, now)) || ct_live(&rev, now)) {
		count(STAT_TRACKED);
		return TCX_NEXT;
	}

	__be32 pod = dir == DIR_EGRESS ? ip.saddr : ip.daddr;
	__be32 peer = dir == DIR_EGRESS ? ip.daddr : ip.saddr;
	struct endpoint *ep = bpf_map_lookup_elem(&endpoints, &pod);
	int allowed = 0;
	if (!ep || !(ep->flags & (1 << dir))) {
		count(STAT_UNISOLATED);
		allowed = 1;
	} else if (dir == DIR_INGRESS && bpf_map_lookup_elem(&host_addrs, &peer)) {
		allowed = 1;
	} else {
		struct rule_key k = {.prefixlen = 64 + 32, .pod = pod, .dir = dir, .peer = peer};
		struct rule_val *r = bpf_map_lookup_elem(&rules, &k);
		// A later fragment carries no ports: only a rule without ports covers it.
		if (r && ports_allow(r, first ? ip.protocol : 0xff, bpf_ntohs(fwd.dport)))
			allowed = 1;
		if (allowed)
			count(STAT_ALLOWED);
	}
	if (!allowed) {
		count(STAT_DENIED);
		return TCX_DROP;
	}
	struct ct_val v = {.seen = now};
	bpf_map_update_elem(&conntrack, &fwd, &v, BPF_ANY);
	return TCX_NEXT;
}

SEC("tcx/ingress")
int from_pod(struct __sk_buff *skb)
{
	return check(skb, DIR_EGRESS);
}

SEC("tcx/egress")
int to_pod(struct __sk_buff *skb)
{
	return check(skb, DIR_INGRESS);
}
