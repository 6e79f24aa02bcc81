// Packet parsing shared by the tc programs (nodeport.c, netpol.c): the IPv4
// header and the L4 ports, read with bpf_skb_load_bytes so neither program
// depends on how much of the packet is linear.
#ifndef SKIFF_PACKET_H
#define SKIFF_PACKET_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define ETH_P_IP 0x0800
#define ETH_HLEN 14
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define IPPROTO_SCTP 132

// The IPv4 header (linux/ip.h needs the target's asm headers); little-endian
// bitfields, as the targets bpf2go builds for.
struct iphdr {
	__u8 ihl : 4, version : 4;
	__u8 tos;
	__be16 tot_len;
	__be16 id;
	__be16 frag_off;
	__u8 ttl;
	__u8 protocol;
	__sum16 check;
	__be32 saddr;
	__be32 daddr;
};

// load_ipv4 reads skb's IPv4 header: 0 when read, 1 when the packet is not
// IPv4 (ARP, IPv6), -1 when it claims IPv4 but is too short.
static __always_inline int load_ipv4(struct __sk_buff *skb, struct iphdr *ip)
{
	if (skb->protocol != bpf_htons(ETH_P_IP))
		return 1;
	if (bpf_skb_load_bytes(skb, ETH_HLEN, ip, sizeof(*ip)) < 0)
		return -1;
	return 0;
}

// l4_offset is where ip's payload starts, after any IP options.
static __always_inline __u32 l4_offset(const struct iphdr *ip)
{
	return ETH_HLEN + ip->ihl * 4;
}

// first_fragment reports whether ip carries the start of its payload (an
// unfragmented packet does); later fragments carry no L4 header.
static __always_inline int first_fragment(const struct iphdr *ip)
{
	return (ip->frag_off & bpf_htons(0x1fff)) == 0;
}

// fragmented reports whether ip is any part of a fragmented packet (MF or an offset).
static __always_inline int fragmented(const struct iphdr *ip)
{
	return (ip->frag_off & bpf_htons(0x3fff)) != 0;
}

// has_ports reports whether ip's protocol starts with source and destination ports.
static __always_inline int has_ports(const struct iphdr *ip)
{
	return ip->protocol == IPPROTO_TCP || ip->protocol == IPPROTO_UDP || ip->protocol == IPPROTO_SCTP;
}

// load_ports reads the source and destination ports (network order) after ip.
static __always_inline int load_ports(struct __sk_buff *skb, const struct iphdr *ip, __be16 ports[2])
{
	return bpf_skb_load_bytes(skb, l4_offset(ip), ports, 2 * sizeof(__be16)) < 0 ? -1 : 0;
}

#endif
