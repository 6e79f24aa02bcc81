//go:build ignore

// NodePort, LoadBalancer and hostPort traffic that reaches a node from outside.
//
// The socket LB (sock_lb.c) only sees sockets of the node's own cgroups; a
// packet from another host to nodeIP:nodePort needs translating on the wire.
// These tc programs sit on the node's external interface:
//
// ingress: a new flow to a known (address, port, protocol) picks a backend.
//   A backend on this node gets DNAT only: the kernel forwards the packet to
//   the pod and the client's address is preserved. A backend on another node
//   gets DNAT and SNAT to the address the packet arrived at (so its reply
//   comes back here) and is redirected out at once (the kernel would drop a
//   forwarded packet carrying one of its own addresses as source).
//   A reply to a SNATed flow is translated back and redirected to the client.
// egress: a local backend's reply gets the node's address and port back.
//
// An entry's backends are slots beside it (see np_svc), so an entry holds as
// many as the socket LB's Services. Flows are kept in LRU maps keyed by the
// 5-tuple in each direction, as Cilium's nodeport.h keeps its CT and SNAT
// entries: an established flow keeps its backend while that stays a member. IPv4 without IP options
// or fragments only; everything else passes untouched.

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "packet.h"

#define AF_INET 2
#define NP_LOCAL 1 // backend runs on this node

#define IP_CSUM_OFF (ETH_HLEN + 10)
#define IP_SRC_OFF (ETH_HLEN + 12)
#define IP_DST_OFF (ETH_HLEN + 16)
#define L4_OFF (ETH_HLEN + 20)
#define TCP_CSUM_OFF (L4_OFF + 16)
#define UDP_CSUM_OFF (L4_OFF + 6)

char __license[] SEC("license") = "Dual MIT/GPL";

struct np_key {
	__be32 addr;
	__be16 port;
	__u8 proto;
	__u8 pad;
};

// An entry's backends sit in slots (entry, bank, 0..count-1), as the socket
// LB keeps a Service's (Cilium's service map + backend slots): a change is
// written into the bank not in use and np_svc is flipped to it with one
// update, so a packet sees the old set or the new one, of any size.
struct np_svc {
	__u32 count;
	__u32 bank; // 0 or 1
};

struct np_slot_key {
	struct np_key svc;
	__u32 bank;
	__u32 idx;
};

struct np_backend {
	__be32 addr;
	__be16 port;
	__u8 flags;
	__u8 pad;
};

// Set membership, so a tracked flow's backend is re-validated in O(1).
struct np_member_key {
	struct np_key svc;
	__be32 addr;
	__be16 port;
	__u16 pad;
};

struct np_tuple {
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 pad[3];
};

// np_nat is a packet's tuple after translation.
struct np_nat {
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
	__u8 redirect; // send out at once (SNATed) instead of letting the kernel forward it
	__u8 pad[3];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct np_key);
	__type(value, struct np_svc);
} np_services SEC(".maps");

// Slots of every entry's two banks; sized as the socket LB's backends map.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct np_slot_key);
	__type(value, struct np_backend);
} np_backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct np_member_key);
	__type(value, __u8);
} np_members SEC(".maps");

// Forward flows: the client's tuple as it arrives -> its translation.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 262144);
	__type(key, struct np_tuple);
	__type(value, struct np_nat);
} np_ct SEC(".maps");

// Replies: the backend's tuple as it answers -> the tuple the client expects.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 262144);
	__type(key, struct np_tuple);
	__type(value, struct np_nat);
} np_rev SEC(".maps");

// parse reads the IPv4 TCP/UDP tuple of skb; -1 for anything else (IP
// options and fragments included: the rewrite offsets assume neither).
static __always_inline int parse(struct __sk_buff *skb, struct np_tuple *t)
{
	struct iphdr ip;
	__be16 ports[2];

	if (load_ipv4(skb, &ip) || ip.ihl != 5 || fragmented(&ip))
		return -1;
	if (ip.protocol != IPPROTO_TCP && ip.protocol != IPPROTO_UDP)
		return -1;
	if (load_ports(skb, &ip, ports))
		return -1;
	t->saddr = ip.saddr;
	t->daddr = ip.daddr;
	t->sport = ports[0];
	t->dport = ports[1];
	t->proto = ip.protocol;
	return 0;
}

static __always_inline int set_addr(struct __sk_buff *skb, int csum_off, __u64 l4flags, int off, __be32 from, __be32 to)
{
	if (from == to)
		return 0;
	if (bpf_l4_csum_replace(skb, csum_off, from, to, l4flags | BPF_F_PSEUDO_HDR | sizeof(to)) ||
	    bpf_l3_csum_replace(skb, IP_CSUM_OFF, from, to, sizeof(to)))
		return -1;
	return bpf_skb_store_bytes(skb, off, &to, sizeof(to), 0);
}

static __always_inline int set_port(struct __sk_buff *skb, int csum_off, __u64 l4flags, int off, __be16 from, __be16 to)
{
	if (from == to)
		return 0;
	if (bpf_l4_csum_replace(skb, csum_off, from, to, l4flags | sizeof(to)))
		return -1;
	return bpf_skb_store_bytes(skb, off, &to, sizeof(to), 0);
}

// rewrite turns t into n on the wire, with the IP and L4 checksums.
static __always_inline int rewrite(struct __sk_buff *skb, const struct np_tuple *t, const struct np_nat *n)
{
	int csum_off = TCP_CSUM_OFF;
	__u64 l4flags = 0;

	if (t->proto == IPPROTO_UDP) {
		csum_off = UDP_CSUM_OFF;
		l4flags = BPF_F_MARK_MANGLED_0; // a UDP checksum of 0 means none: keep it so
	}
	if (set_addr(skb, csum_off, l4flags, IP_SRC_OFF, t->saddr, n->saddr) ||
	    set_addr(skb, csum_off, l4flags, IP_DST_OFF, t->daddr, n->daddr) ||
	    set_port(skb, csum_off, l4flags, L4_OFF, t->sport, n->sport) ||
	    set_port(skb, csum_off, l4flags, L4_OFF + 2, t->dport, n->dport))
		return -1;
	return 0;
}

// out sends a translated packet on towards its new destination, through the
// kernel's FIB and neighbour table.
static __always_inline int out(struct __sk_buff *skb, const struct np_nat *n)
{
	struct bpf_fib_lookup fib = {};

	fib.family = AF_INET;
	fib.ipv4_src = n->saddr;
	fib.ipv4_dst = n->daddr;
	fib.ifindex = skb->ingress_ifindex;
	switch (bpf_fib_lookup(skb, &fib, sizeof(fib), BPF_FIB_LOOKUP_SKIP_NEIGH)) {
	case BPF_FIB_LKUP_RET_SUCCESS:
	case BPF_FIB_LKUP_RET_NO_NEIGH:
		return bpf_redirect_neigh(fib.ifindex, NULL, 0, 0);
	}
	return TC_ACT_SHOT;
}

// snat_port finds a source port for a SNATed flow whose reply tuple is free:
// the client's own first, then random ones above 1023.
static __always_inline int snat_port(struct np_tuple *rk, const struct np_nat *rev, __be16 client_port)
{
	rk->dport = client_port;
	for (int i = 0; i < 8; i++) {
		if (!bpf_map_update_elem(&np_rev, rk, rev, BPF_NOEXIST))
			return 0;
		rk->dport = bpf_htons(1024 + bpf_get_prandom_u32() % (65536 - 1024));
	}
	return -1;
}

// pick draws a random backend of the entry's bank in use; 1 when the entry
// is not ours, -1 when it has no backend. The entry is read once more if the
// slot vanished under us (a concurrent change freed the bank we read).
static __always_inline int pick(const struct np_key *key, struct np_backend *out)
{
	struct np_slot_key sk = {};
	struct np_backend *b;
	struct np_svc *svc;

	sk.svc = *key;
	for (int attempt = 0; attempt < 2; attempt++) {
		svc = bpf_map_lookup_elem(&np_services, key);
		if (!svc)
			return attempt ? -1 : 1;
		if (svc->count == 0)
			return -1; // no (local) endpoint: dropped, as kube-proxy does
		sk.bank = svc->bank;
		sk.idx = bpf_get_prandom_u32() % svc->count;
		b = bpf_map_lookup_elem(&np_backends, &sk);
		if (b) {
			*out = *b;
			return 0;
		}
	}
	return -1;
}

// np_open picks a backend for a new flow and records both directions.
static __always_inline int np_open(const struct np_tuple *t, struct np_nat *fwd)
{
	struct np_key key = {};
	struct np_backend be;
	struct np_tuple rk = {};
	struct np_nat rev = {};
	int ret;

	key.addr = t->daddr;
	key.port = t->dport;
	key.proto = t->proto;
	ret = pick(&key, &be);
	if (ret)
		return ret;

	fwd->daddr = be.addr;
	fwd->dport = be.port;
	fwd->saddr = t->saddr;
	fwd->sport = t->sport;
	fwd->redirect = !(be.flags & NP_LOCAL);
	if (fwd->redirect)
		fwd->saddr = t->daddr; // the address the client reached: ours

	// The reply comes back as backend -> fwd's source; it must look like
	// the node answering the client.
	rk.saddr = fwd->daddr;
	rk.sport = fwd->dport;
	rk.daddr = fwd->saddr;
	rk.proto = t->proto;
	rev.saddr = t->daddr;
	rev.sport = t->dport;
	rev.daddr = t->saddr;
	rev.dport = t->sport;
	rev.redirect = fwd->redirect;
	if (fwd->redirect) {
		if (snat_port(&rk, &rev, t->sport))
			return -1;
		fwd->sport = rk.dport;
	} else {
		rk.dport = fwd->sport;
		bpf_map_update_elem(&np_rev, &rk, &rev, BPF_ANY);
	}
	bpf_map_update_elem(&np_ct, t, fwd, BPF_ANY);
	return 0;
}

// current reports whether a recorded flow's backend still serves the entry
// the flow came in at, so a flow whose backend went is sent to another (a
// UDP client keeping its port would otherwise stay on the removed one).
static __always_inline int current(const struct np_tuple *t, const struct np_nat *n)
{
	struct np_member_key mk = {};

	mk.svc.addr = t->daddr;
	mk.svc.port = t->dport;
	mk.svc.proto = t->proto;
	mk.addr = n->daddr;
	mk.port = n->dport;
	return bpf_map_lookup_elem(&np_members, &mk) != NULL;
}

SEC("tc")
int skiff_np_ingress(struct __sk_buff *skb)
{
	struct np_tuple t = {};
	struct np_nat fwd = {};
	struct np_nat *n;
	int ret;

	if (parse(skb, &t))
		return TC_ACT_OK;
	// A remote backend's reply to a SNATed flow.
	n = bpf_map_lookup_elem(&np_rev, &t);
	if (n && n->redirect) {
		fwd = *n;
		if (rewrite(skb, &t, &fwd))
			return TC_ACT_SHOT;
		return out(skb, &fwd);
	}
	n = bpf_map_lookup_elem(&np_ct, &t);
	if (n && current(&t, n)) {
		fwd = *n;
	} else {
		ret = np_open(&t, &fwd);
		if (ret > 0)
			return TC_ACT_OK;
		if (ret < 0)
			return TC_ACT_SHOT;
	}
	if (rewrite(skb, &t, &fwd))
		return TC_ACT_SHOT;
	if (fwd.redirect)
		return out(skb, &fwd);
	return TC_ACT_OK;
}

SEC("tc")
int skiff_np_egress(struct __sk_buff *skb)
{
	struct np_tuple t = {};
	struct np_nat rev;
	struct np_nat *n;

	if (parse(skb, &t))
		return TC_ACT_OK;
	n = bpf_map_lookup_elem(&np_rev, &t);
	if (!n || n->redirect)
		return TC_ACT_OK;
	rev = *n;
	if (rewrite(skb, &t, &rev))
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}
