//go:build ignore

// Socket-level load balancing for Skiff Services.
//
// A connect()/sendmsg() to a Service address (VIP, port, protocol) is
// rewritten to one of the Service's backends before the kernel routes it, so
// no packet ever carries the VIP and no NAT state exists. UDP replies are
// rewritten back (recvmsg, getpeername) so the application sees the VIP.
//
// All addresses are kept as 16 bytes; IPv4 is stored IPv4-mapped
// (::ffff:a.b.c.d), which also makes a v6 socket talking to a mapped v4 VIP
// hit the v4 Service. Addresses and ports are in network byte order.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define ECONNREFUSED 111
#define NSEC_PER_SEC 1000000000ULL

char __license[] SEC("license") = "Dual MIT/GPL";

struct svc_key {
	__be32 addr[4];
	__be16 port;
	__u8 proto;
	__u8 pad;
};

struct svc_val {
	__u32 count;        // number of backends in slots (rev, 0..count-1)
	__u32 rev;          // slot generation; a change writes a new one, then flips this
	__u32 affinity_sec; // ClientIP affinity timeout, 0 = off
	__u32 flags;
};

struct slot_key {
	__u32 rev;
	__u32 idx;
};

struct backend {
	__be32 addr[4];
	__be16 port;
	__u16 pad;
};

// Set membership, so a cached choice can be re-validated in O(1) even after
// the Service moved to a new slot generation.
struct member_key {
	struct svc_key svc;
	struct backend be;
};

struct aff_key {
	__u64 netns; // the client: one pod = one netns = one IP
	struct svc_key svc;
	__u32 pad;
};

struct aff_val {
	struct backend be;
	__u32 pad;
	__u64 ts;
};

// Unconnected UDP: which backend this socket uses for a Service.
struct sock_svc_key {
	__u64 cookie;
	struct svc_key svc;
	__u32 pad;
};

// Reverse translation: a socket talking to this backend reached it via svc.
struct sock_be_key {
	__u64 cookie;
	struct backend be;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct svc_key);
	__type(value, struct svc_val);
} services SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 262144);
	__type(key, struct slot_key);
	__type(value, struct backend);
} backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 262144);
	__type(key, struct member_key);
	__type(value, __u8);
} members SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct aff_key);
	__type(value, struct aff_val);
} affinity SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct sock_svc_key);
	__type(value, struct backend);
} udp_fwd SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct sock_be_key);
	__type(value, struct svc_key);
} udp_rev SEC(".maps");

static __always_inline int is_member(const struct svc_key *svc, const struct backend *be)
{
	struct member_key mk = {};

	mk.svc = *svc;
	mk.be = *be;
	return bpf_map_lookup_elem(&members, &mk) != NULL;
}

// pick draws a random backend of the current slot generation. The Service
// entry is re-read once if the slots vanished under us (a concurrent switch
// freed the generation we read).
static __always_inline int pick(const struct svc_key *svc, struct backend *out)
{
	struct svc_val *sv;
	struct backend *b;
	struct slot_key sk;

	for (int attempt = 0; attempt < 2; attempt++) {
		sv = bpf_map_lookup_elem(&services, svc);
		if (!sv || sv->count == 0)
			return -1;
		sk.rev = sv->rev;
		sk.idx = bpf_get_prandom_u32() % sv->count;
		b = bpf_map_lookup_elem(&backends, &sk);
		if (b) {
			*out = *b;
			return 0;
		}
	}
	return -1;
}

static __always_inline int select_backend(void *ctx, const struct svc_key *svc,
					  const struct svc_val *sv, struct backend *out)
{
	struct aff_key ak = {};
	struct aff_val av = {};
	struct aff_val *cur;
	__u64 now;

	if (!sv->affinity_sec)
		return pick(svc, out);

	ak.netns = bpf_get_netns_cookie(ctx);
	ak.svc = *svc;
	now = bpf_ktime_get_ns();
	cur = bpf_map_lookup_elem(&affinity, &ak);
	if (cur && now - cur->ts <= (__u64)sv->affinity_sec * NSEC_PER_SEC &&
	    is_member(svc, &cur->be)) {
		*out = cur->be;
		cur->ts = now;
		return 0;
	}
	if (pick(svc, out))
		return -1;
	av.be = *out;
	av.ts = now;
	bpf_map_update_elem(&affinity, &ak, &av, BPF_ANY);
	return 0;
}

static __always_inline void mapped4(__be32 addr[4], __be32 ip4)
{
	addr[0] = 0;
	addr[1] = 0;
	addr[2] = bpf_htonl(0xffff);
	addr[3] = ip4;
}

static __always_inline int is_mapped4(const __be32 addr[4])
{
	return addr[0] == 0 && addr[1] == 0 && addr[2] == bpf_htonl(0xffff);
}

static __always_inline void remember_rev(struct bpf_sock_addr *ctx, const struct svc_key *svc,
					 const struct backend *be)
{
	struct sock_be_key rk = {};

	rk.cookie = bpf_get_socket_cookie(ctx);
	rk.be = *be;
	bpf_map_update_elem(&udp_rev, &rk, svc, BPF_ANY);
}

// xlate_fwd resolves svc for a connect() or an unconnected sendmsg().
// Returns 0 with *out set to translate, 1 to leave the call alone, -1 to
// refuse it (Service without backends).
static __always_inline int xlate_fwd(struct bpf_sock_addr *ctx, const struct svc_key *svc,
				     struct backend *out, int sendmsg)
{
	struct sock_svc_key fk = {};
	struct svc_val *sv;
	struct backend *cached;

	sv = bpf_map_lookup_elem(&services, svc);
	if (!sv)
		return 1; // not a Service
	if (sendmsg) {
		// Keep a socket on one backend (as conntrack keeps a 5-tuple on
		// one DNAT target), but only while that backend is still in the
		// Service: a removed backend is re-selected on the next send.
		fk.cookie = bpf_get_socket_cookie(ctx);
		fk.svc = *svc;
		cached = bpf_map_lookup_elem(&udp_fwd, &fk);
		if (cached && is_member(svc, cached)) {
			*out = *cached;
			goto rev;
		}
	}
	if (select_backend(ctx, svc, sv, out))
		return -1;
	if (sendmsg)
		bpf_map_update_elem(&udp_fwd, &fk, out, BPF_ANY);
rev:
	if (svc->proto == IPPROTO_UDP)
		remember_rev(ctx, svc, out);
	return 0;
}

static __always_inline int refuse(void)
{
	bpf_set_retval(-ECONNREFUSED);
	return 0;
}

static __always_inline int sock4_fwd(struct bpf_sock_addr *ctx, int sendmsg)
{
	struct svc_key svc = {};
	struct backend be;
	int ret;

	if (ctx->protocol != IPPROTO_TCP && ctx->protocol != IPPROTO_UDP)
		return 1;
	mapped4(svc.addr, ctx->user_ip4);
	svc.port = (__be16)ctx->user_port;
	svc.proto = ctx->protocol;
	ret = xlate_fwd(ctx, &svc, &be, sendmsg);
	if (ret > 0)
		return 1;
	if (ret < 0 || !is_mapped4(be.addr))
		return refuse();
	ctx->user_ip4 = be.addr[3];
	ctx->user_port = be.port;
	return 1;
}

static __always_inline int sock6_fwd(struct bpf_sock_addr *ctx, int sendmsg)
{
	struct svc_key svc = {};
	struct backend be;
	int ret;

	if (ctx->protocol != IPPROTO_TCP && ctx->protocol != IPPROTO_UDP)
		return 1;
	svc.addr[0] = ctx->user_ip6[0];
	svc.addr[1] = ctx->user_ip6[1];
	svc.addr[2] = ctx->user_ip6[2];
	svc.addr[3] = ctx->user_ip6[3];
	svc.port = (__be16)ctx->user_port;
	svc.proto = ctx->protocol;
	ret = xlate_fwd(ctx, &svc, &be, sendmsg);
	if (ret > 0)
		return 1;
	if (ret < 0)
		return refuse();
	ctx->user_ip6[0] = be.addr[0];
	ctx->user_ip6[1] = be.addr[1];
	ctx->user_ip6[2] = be.addr[2];
	ctx->user_ip6[3] = be.addr[3];
	ctx->user_port = be.port;
	return 1;
}

// rev_lookup finds the Service a UDP socket reached this peer through.
static __always_inline struct svc_key *rev_lookup(struct bpf_sock_addr *ctx, const __be32 addr[4])
{
	struct sock_be_key rk = {};

	rk.cookie = bpf_get_socket_cookie(ctx);
	rk.be.addr[0] = addr[0];
	rk.be.addr[1] = addr[1];
	rk.be.addr[2] = addr[2];
	rk.be.addr[3] = addr[3];
	rk.be.port = (__be16)ctx->user_port;
	return bpf_map_lookup_elem(&udp_rev, &rk);
}

static __always_inline int sock4_rev(struct bpf_sock_addr *ctx)
{
	__be32 addr[4];
	struct svc_key *svc;

	mapped4(addr, ctx->user_ip4);
	svc = rev_lookup(ctx, addr);
	if (svc) {
		ctx->user_ip4 = svc->addr[3];
		ctx->user_port = svc->port;
	}
	return 1;
}

static __always_inline int sock6_rev(struct bpf_sock_addr *ctx)
{
	__be32 addr[4];
	struct svc_key *svc;

	addr[0] = ctx->user_ip6[0];
	addr[1] = ctx->user_ip6[1];
	addr[2] = ctx->user_ip6[2];
	addr[3] = ctx->user_ip6[3];
	svc = rev_lookup(ctx, addr);
	if (svc) {
		ctx->user_ip6[0] = svc->addr[0];
		ctx->user_ip6[1] = svc->addr[1];
		ctx->user_ip6[2] = svc->addr[2];
		ctx->user_ip6[3] = svc->addr[3];
		ctx->user_port = svc->port;
	}
	return 1;
}

SEC("cgroup/connect4")
int skiff_connect4(struct bpf_sock_addr *ctx)
{
	return sock4_fwd(ctx, 0);
}

SEC("cgroup/sendmsg4")
int skiff_sendmsg4(struct bpf_sock_addr *ctx)
{
	return sock4_fwd(ctx, 1);
}

SEC("cgroup/recvmsg4")
int skiff_recvmsg4(struct bpf_sock_addr *ctx)
{
	return sock4_rev(ctx);
}

SEC("cgroup/getpeername4")
int skiff_getpeername4(struct bpf_sock_addr *ctx)
{
	return sock4_rev(ctx);
}

SEC("cgroup/connect6")
int skiff_connect6(struct bpf_sock_addr *ctx)
{
	return sock6_fwd(ctx, 0);
}

SEC("cgroup/sendmsg6")
int skiff_sendmsg6(struct bpf_sock_addr *ctx)
{
	return sock6_fwd(ctx, 1);
}

SEC("cgroup/recvmsg6")
int skiff_recvmsg6(struct bpf_sock_addr *ctx)
{
	return sock6_rev(ctx);
}

SEC("cgroup/getpeername6")
int skiff_getpeername6(struct bpf_sock_addr *ctx)
{
	return sock6_rev(ctx);
}

// Connected UDP sockets never pass through sendmsg again, so one pinned to a
// removed backend would keep talking to it forever. After a Service change
// the loader runs this iterator: every connected UDP socket whose peer it
// reached through a Service that no longer contains that peer is aborted
// (the application sees ECONNABORTED and reconnects, which re-selects).
// Minimal CO-RE views of kernel types; offsets are relocated at load time.
struct in6_addr {
	union {
		__be32 u6_addr32[4];
	} in6_u;
} __attribute__((preserve_access_index));

struct sock_common {
	__be32 skc_daddr;
	__be16 skc_dport;
	unsigned short skc_family;
	struct in6_addr skc_v6_daddr;
} __attribute__((preserve_access_index));

struct udp_sock;

struct bpf_iter_meta;

struct bpf_iter__udp {
	struct bpf_iter_meta *meta;
	struct udp_sock *udp_sk;
} __attribute__((preserve_access_index));

extern int bpf_sock_destroy(struct sock_common *sk) __ksym;

SEC("iter/udp")
int skiff_udp_term(struct bpf_iter__udp *ctx)
{
	struct sock_common *sk = (struct sock_common *)ctx->udp_sk;
	struct sock_be_key rk = {};
	struct svc_key *svc;

	if (!sk || sk->skc_dport == 0)
		return 0;
	if (sk->skc_family == AF_INET) {
		mapped4(rk.be.addr, sk->skc_daddr);
	} else if (sk->skc_family == AF_INET6) {
		rk.be.addr[0] = sk->skc_v6_daddr.in6_u.u6_addr32[0];
		rk.be.addr[1] = sk->skc_v6_daddr.in6_u.u6_addr32[1];
		rk.be.addr[2] = sk->skc_v6_daddr.in6_u.u6_addr32[2];
		rk.be.addr[3] = sk->skc_v6_daddr.in6_u.u6_addr32[3];
	} else {
		return 0;
	}
	rk.be.port = sk->skc_dport;
	rk.cookie = bpf_get_socket_cookie(sk);
	svc = bpf_map_lookup_elem(&udp_rev, &rk);
	if (!svc || is_member(svc, &rk.be))
		return 0;
	bpf_sock_destroy(sk);
	bpf_map_delete_elem(&udp_rev, &rk);
	return 0;
}
