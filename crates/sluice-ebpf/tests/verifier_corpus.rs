//! Shared by the verifier_* tests: a minimal ELF loader (aya-obj; a stand-in for the real
//! loader) and a corpus of typical XDP programs in C, compiled with clang when available.
#![allow(dead_code)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use sluice_ebpf::insn::Insn;
use sluice_ebpf::program::{MapDef, Program};

/// Loads every program of an ELF object: maps get indices in name order, data sections
/// become single-entry arrays, calls are linked (subprograms appended).
pub fn load_elf(data: &[u8]) -> Result<Vec<Program>, String> {
    let mut obj = aya_obj::Object::parse(data).map_err(|e| format!("parse: {e}"))?;
    let mut names: Vec<String> = obj.maps.keys().cloned().collect();
    names.sort();
    let maps: Vec<(String, aya_obj::Map)> = names.iter().map(|n| (n.clone(), obj.maps[n].clone())).collect();
    let defs: Vec<MapDef> = maps
        .iter()
        .map(|(n, m)| MapDef {
            name: n.clone(),
            map_type: m.map_type(),
            key_size: m.key_size(),
            value_size: m.value_size(),
            max_entries: m.max_entries(),
            flags: m.map_flags(),
            inner: None,
        })
        .collect();
    let text: HashSet<usize> = obj.functions.keys().map(|(s, _)| *s).collect();
    obj.relocate_maps(maps.iter().enumerate().map(|(i, (n, m))| (n.as_str(), i as i32, m)), &text)
        .map_err(|e| format!("relocate maps: {e}"))?;
    obj.relocate_calls(&text).map_err(|e| format!("relocate calls: {e}"))?;
    let mut progs = Vec::new();
    let mut pnames: Vec<&String> = obj.programs.keys().collect();
    pnames.sort();
    for name in pnames {
        let p = &obj.programs[name];
        let f = &obj.functions[&p.function_key()];
        let insns =
            f.instructions.iter().map(|i| Insn { code: i.code, dst: i.dst_reg(), src: i.src_reg(), off: i.off, imm: i.imm }).collect();
        progs.push(Program { name: name.clone(), section: "xdp".to_string(), insns, maps: defs.clone() });
    }
    Ok(progs)
}

/// True under CI (`CI=true`), where the test script installs clang and its headers: a
/// missing tool there is a failure, not a reason to skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

pub fn clang() -> Option<PathBuf> {
    let found = Command::new("clang").arg("--version").output().ok().filter(|o| o.status.success()).map(|_| PathBuf::from("clang"));
    assert!(found.is_some() || !in_ci(), "clang is missing under CI=true (scripts/test installs it)");
    found
}

/// Compiles `src` with `-O2 -mcpu=<cpu>` in a temp dir of its own (removed afterwards) and
/// loads it. `None` only when clang or its headers are missing outside CI.
pub fn compile(name: &str, src: &str, cpu: &str) -> Option<Vec<Program>> {
    let cc = clang()?;
    let dir = ScratchDir(std::env::temp_dir().join(format!("sluice-verifier-clang-{}-{name}-{cpu}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap_or_else(|e| panic!("{}: {e}", dir.0.display()));
    compile_in(&dir.0, cc, name, src, cpu)
}

/// A directory removed when dropped, also when a failed compile panics.
struct ScratchDir(PathBuf);

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn compile_in(dir: &Path, cc: PathBuf, name: &str, src: &str, cpu: &str) -> Option<Vec<Program>> {
    let c = dir.join(format!("{name}.c"));
    let o = dir.join(format!("{name}.{cpu}.o"));
    std::fs::write(&c, format!("{COMMON}\n{src}")).unwrap_or_else(|e| panic!("{}: {e}", c.display()));
    let mut cmd = Command::new(cc);
    cmd.args(["-O2", "-g", "-target", "bpf", &format!("-mcpu={cpu}"), "-Wno-compare-distinct-pointer-types"]);
    for inc in ["/usr/include/x86_64-linux-gnu", "/usr/include/aarch64-linux-gnu"] {
        if Path::new(inc).exists() {
            cmd.arg(format!("-I{inc}"));
        }
    }
    let out = cmd.arg("-c").arg(&c).arg("-o").arg(&o).output().unwrap_or_else(|e| panic!("running clang: {e}"));
    if !out.status.success() {
        let msg = String::from_utf8_lossy(&out.stderr);
        if (msg.contains("bpf_helpers.h") || msg.contains("file not found")) && !in_ci() {
            eprintln!("skipping {name}: headers missing ({msg})");
            return None;
        }
        panic!("clang failed for {name} ({cpu}): {msg}");
    }
    let data = std::fs::read(&o).unwrap_or_else(|e| panic!("{}: {e}", o.display()));
    Some(load_elf(&data).unwrap_or_else(|e| panic!("{name}: {e}")))
}

pub const COMMON: &str = r#"
#include <stddef.h>
#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <linux/tcp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct hdr_cursor { void *pos; };
struct vlan_hdr { __be16 h_vlan_TCI; __be16 h_vlan_encapsulated_proto; };

static __always_inline int proto_is_vlan(__u16 h_proto)
{
	return !!(h_proto == bpf_htons(ETH_P_8021Q) || h_proto == bpf_htons(ETH_P_8021AD));
}

static __always_inline int parse_ethhdr(struct hdr_cursor *nh, void *data_end, struct ethhdr **ethhdr)
{
	struct ethhdr *eth = nh->pos;
	struct vlan_hdr *vlh;
	__u16 h_proto;
	int i;

	if (nh->pos + sizeof(*eth) > data_end)
		return -1;
	nh->pos += sizeof(*eth);
	*ethhdr = eth;
	vlh = nh->pos;
	h_proto = eth->h_proto;
#pragma unroll
	for (i = 0; i < 2; i++) {
		if (!proto_is_vlan(h_proto))
			break;
		if (vlh + 1 > data_end)
			break;
		h_proto = vlh->h_vlan_encapsulated_proto;
		vlh++;
	}
	nh->pos = vlh;
	return h_proto;
}

static __always_inline int parse_iphdr(struct hdr_cursor *nh, void *data_end, struct iphdr **iphdr)
{
	struct iphdr *iph = nh->pos;
	int hdrsize;

	if (iph + 1 > data_end)
		return -1;
	hdrsize = iph->ihl * 4;
	if (hdrsize < sizeof(*iph))
		return -1;
	if (nh->pos + hdrsize > data_end)
		return -1;
	nh->pos += hdrsize;
	*iphdr = iph;
	return iph->protocol;
}

static __always_inline int parse_ip6hdr(struct hdr_cursor *nh, void *data_end, struct ipv6hdr **ip6hdr)
{
	struct ipv6hdr *ip6h = nh->pos;
	if (ip6h + 1 > data_end)
		return -1;
	nh->pos = ip6h + 1;
	*ip6hdr = ip6h;
	return ip6h->nexthdr;
}

static __always_inline int parse_udphdr(struct hdr_cursor *nh, void *data_end, struct udphdr **udphdr)
{
	int len;
	struct udphdr *h = nh->pos;
	if (h + 1 > data_end)
		return -1;
	nh->pos = h + 1;
	*udphdr = h;
	len = bpf_ntohs(h->len) - sizeof(struct udphdr);
	if (len < 0)
		return -1;
	return len;
}

static __always_inline int parse_tcphdr(struct hdr_cursor *nh, void *data_end, struct tcphdr **tcphdr)
{
	int len;
	struct tcphdr *h = nh->pos;
	if (h + 1 > data_end)
		return -1;
	len = h->doff * 4;
	if (len < sizeof(*h))
		return -1;
	if (nh->pos + len > data_end)
		return -1;
	nh->pos += len;
	*tcphdr = h;
	return len;
}
char _license[] SEC("license") = "GPL";
"#;

pub const FIREWALL: &str = r#"
struct flow_key { __u32 saddr, daddr; __u16 sport, dport; __u8 proto; __u8 pad[3]; };
struct flow_stats { __u64 packets, bytes; };

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct flow_key);
	__type(value, struct flow_stats);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} blocked SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} verdicts SEC(".maps");

static __always_inline int count(int action)
{
	__u32 k = action;
	__u64 *v = bpf_map_lookup_elem(&verdicts, &k);
	if (v)
		*v += 1;
	return action;
}

SEC("xdp")
int xdp_firewall(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct hdr_cursor nh = { .pos = data };
	struct ethhdr *eth;
	struct iphdr *iph;
	struct udphdr *udph;
	struct tcphdr *tcph;
	struct flow_key key = {};
	struct flow_stats *st, init = {};
	int eth_type, ip_type;

	eth_type = parse_ethhdr(&nh, data_end, &eth);
	if (eth_type != bpf_htons(ETH_P_IP))
		return count(XDP_PASS);
	ip_type = parse_iphdr(&nh, data_end, &iph);
	if (ip_type < 0)
		return count(XDP_ABORTED);
	if (bpf_map_lookup_elem(&blocked, &iph->saddr))
		return count(XDP_DROP);
	key.saddr = iph->saddr;
	key.daddr = iph->daddr;
	key.proto = ip_type;
	if (ip_type == IPPROTO_UDP) {
		if (parse_udphdr(&nh, data_end, &udph) < 0)
			return count(XDP_ABORTED);
		key.sport = udph->source;
		key.dport = udph->dest;
		if (udph->dest == bpf_htons(9))
			return count(XDP_DROP);
	} else if (ip_type == IPPROTO_TCP) {
		if (parse_tcphdr(&nh, data_end, &tcph) < 0)
			return count(XDP_ABORTED);
		key.sport = tcph->source;
		key.dport = tcph->dest;
		if (tcph->syn && tcph->fin)
			return count(XDP_DROP);
		if (tcph->rst && tcph->syn)
			return count(XDP_DROP);
		if (tcph->urg && !tcph->ack)
			return count(XDP_DROP);
	}
	st = bpf_map_lookup_elem(&flows, &key);
	if (!st) {
		bpf_map_update_elem(&flows, &key, &init, BPF_ANY);
		st = bpf_map_lookup_elem(&flows, &key);
		if (!st)
			return count(XDP_PASS);
	}
	__sync_fetch_and_add(&st->packets, 1);
	__sync_fetch_and_add(&st->bytes, data_end - data);
	return count(XDP_PASS);
}
"#;

pub const REDIRECT: &str = r#"
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} tx_port SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
} cpu_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, unsigned char[ETH_ALEN]);
	__type(value, unsigned char[ETH_ALEN]);
} redirect_params SEC(".maps");

SEC("xdp")
int xdp_sock_prog(struct xdp_md *ctx)
{
	int index = ctx->rx_queue_index;
	if (bpf_map_lookup_elem(&xsks_map, &index))
		return bpf_redirect_map(&xsks_map, index, 0);
	return XDP_PASS;
}

SEC("xdp")
int xdp_redirect_map_func(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct hdr_cursor nh = { .pos = data };
	struct ethhdr *eth;
	unsigned char *dst;

	if (parse_ethhdr(&nh, data_end, &eth) == -1)
		return XDP_ABORTED;
	dst = bpf_map_lookup_elem(&redirect_params, eth->h_source);
	if (!dst)
		return XDP_PASS;
	__builtin_memcpy(eth->h_dest, dst, ETH_ALEN);
	return bpf_redirect_map(&tx_port, 0, 0);
}

SEC("xdp")
int xdp_cpu_spread(struct xdp_md *ctx)
{
	__u32 cpu = bpf_get_prandom_u32() % 8;
	if (ctx->ingress_ifindex == 1)
		return bpf_redirect(2, 0);
	return bpf_redirect_map(&cpu_map, cpu, XDP_PASS);
}
"#;

pub const ENCAP: &str = r#"
struct encap_hdr { __be32 vni; __be16 proto; __be16 flags; };

SEC("xdp")
int xdp_encap(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct ethhdr *eth = data, *neth;
	struct ethhdr saved;
	struct encap_hdr *e;

	if (eth + 1 > data_end)
		return XDP_DROP;
	__builtin_memcpy(&saved, eth, sizeof(saved));
	if (bpf_xdp_adjust_head(ctx, 0 - (int)sizeof(struct encap_hdr)))
		return XDP_DROP;
	data_end = (void *)(long)ctx->data_end;
	data = (void *)(long)ctx->data;
	neth = data;
	e = data + sizeof(*neth);
	if ((void *)(e + 1) > data_end)
		return XDP_DROP;
	__builtin_memcpy(neth, &saved, sizeof(saved));
	e->vni = bpf_htonl(42);
	e->proto = saved.h_proto;
	e->flags = 0;
	neth->h_proto = bpf_htons(0x88b5);
	return XDP_TX;
}

SEC("xdp")
int xdp_decap(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct ethhdr *eth = data;
	struct ethhdr saved;

	if ((void *)eth + sizeof(*eth) + sizeof(struct encap_hdr) > data_end)
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(0x88b5))
		return XDP_PASS;
	__builtin_memcpy(&saved, eth, sizeof(saved));
	saved.h_proto = ((struct encap_hdr *)(eth + 1))->proto;
	if (bpf_xdp_adjust_head(ctx, sizeof(struct encap_hdr)))
		return XDP_DROP;
	data_end = (void *)(long)ctx->data_end;
	data = (void *)(long)ctx->data;
	eth = data;
	if (eth + 1 > data_end)
		return XDP_DROP;
	__builtin_memcpy(eth, &saved, sizeof(saved));
	if (bpf_xdp_adjust_tail(ctx, -4))
		return XDP_DROP;
	return XDP_PASS;
}

SEC("xdp")
int xdp_meta(struct xdp_md *ctx)
{
	void *data, *data_meta;
	__u32 *mark;

	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(__u32)))
		return XDP_PASS;
	data = (void *)(long)ctx->data;
	data_meta = (void *)(long)ctx->data_meta;
	mark = data_meta;
	if ((void *)(mark + 1) > data)
		return XDP_ABORTED;
	*mark = 0xcafe;
	return XDP_PASS;
}
"#;

pub const ROUTER: &str = r#"
#define AF_INET 2
#define AF_INET6 10

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xdp_tx_ports SEC(".maps");

static __always_inline int ip_decrease_ttl(struct iphdr *iph)
{
	__u32 check = (__u32)iph->check;
	check += (__u32)bpf_htons(0x0100);
	iph->check = (__sum16)(check + (check >= 0xFFFF));
	return --iph->ttl;
}

SEC("xdp")
int xdp_fwd(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct bpf_fib_lookup fib_params;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6h;
	struct iphdr *iph;
	__u16 h_proto;
	__u64 nh_off;
	int rc;

	nh_off = sizeof(*eth);
	if (data + nh_off > data_end)
		return XDP_DROP;
	__builtin_memset(&fib_params, 0, sizeof(fib_params));
	h_proto = eth->h_proto;
	if (h_proto == bpf_htons(ETH_P_IP)) {
		iph = data + nh_off;
		if (iph + 1 > data_end)
			return XDP_DROP;
		if (iph->ttl <= 1)
			return XDP_PASS;
		fib_params.family = AF_INET;
		fib_params.tos = iph->tos;
		fib_params.l4_protocol = iph->protocol;
		fib_params.sport = 0;
		fib_params.dport = 0;
		fib_params.tot_len = bpf_ntohs(iph->tot_len);
		fib_params.ipv4_src = iph->saddr;
		fib_params.ipv4_dst = iph->daddr;
	} else if (h_proto == bpf_htons(ETH_P_IPV6)) {
		struct in6_addr *src = (struct in6_addr *)fib_params.ipv6_src;
		struct in6_addr *dst = (struct in6_addr *)fib_params.ipv6_dst;
		ip6h = data + nh_off;
		if (ip6h + 1 > data_end)
			return XDP_DROP;
		if (ip6h->hop_limit <= 1)
			return XDP_PASS;
		fib_params.family = AF_INET6;
		fib_params.flowinfo = *(__be32 *)ip6h & bpf_htonl(0x0FFFFFFF);
		fib_params.l4_protocol = ip6h->nexthdr;
		fib_params.sport = 0;
		fib_params.dport = 0;
		fib_params.tot_len = bpf_ntohs(ip6h->payload_len);
		*src = ip6h->saddr;
		*dst = ip6h->daddr;
	} else {
		return XDP_PASS;
	}
	fib_params.ifindex = ctx->ingress_ifindex;
	rc = bpf_fib_lookup(ctx, &fib_params, sizeof(fib_params), 0);
	if (rc == BPF_FIB_LKUP_RET_SUCCESS) {
		if (!bpf_map_lookup_elem(&xdp_tx_ports, &fib_params.ifindex))
			return XDP_PASS;
		if (h_proto == bpf_htons(ETH_P_IP))
			ip_decrease_ttl(iph);
		else if (h_proto == bpf_htons(ETH_P_IPV6))
			ip6h->hop_limit--;
		__builtin_memcpy(eth->h_dest, fib_params.dmac, ETH_ALEN);
		__builtin_memcpy(eth->h_source, fib_params.smac, ETH_ALEN);
		return bpf_redirect_map(&xdp_tx_ports, fib_params.ifindex, 0);
	}
	return XDP_PASS;
}
"#;

pub const GLOBALS: &str = r#"
volatile const __u32 cfg_port = 53;
volatile const __u8 cfg_mode = 1;
__u64 pkt_count = 0;
__u64 byte_hist[16] = {};
char last_src[6] = {};

static __noinline int classify(void *data, void *data_end)
{
	struct ethhdr *eth = data;
	struct iphdr *iph = data + sizeof(*eth);
	struct udphdr *udph;

	if ((void *)(iph + 1) > data_end)
		return -1;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || iph->protocol != IPPROTO_UDP)
		return 0;
	if (iph->ihl != 5)
		return 0;
	udph = (void *)(iph + 1);
	if ((void *)(udph + 1) > data_end)
		return -1;
	return udph->dest == bpf_htons(cfg_port) ? 1 : 0;
}

static __noinline void record(__u64 len)
{
	__u32 bucket = len >> 7;
	if (bucket > 15)
		bucket = 15;
	__sync_fetch_and_add(&byte_hist[bucket], 1);
}

SEC("xdp")
int xdp_globals(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	int c;

	__sync_fetch_and_add(&pkt_count, 1);
	record(data_end - data);
	if (data + 14 <= data_end)
		__builtin_memcpy(last_src, data + 6, 6);
	c = classify(data, data_end);
	if (c < 0)
		return XDP_ABORTED;
	if (c && cfg_mode)
		return XDP_DROP;
	return XDP_PASS;
}
"#;

pub const LOOPS: &str = r#"
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64[32]);
} sums SEC(".maps");

#define IPV6_EXT_MAX_CHAIN 6

static __always_inline int skip_ip6hdrext(struct hdr_cursor *nh, void *data_end, __u8 next_hdr_type)
{
	for (int i = 0; i < IPV6_EXT_MAX_CHAIN; ++i) {
		struct ipv6_opt_hdr *hdr = nh->pos;
		if (hdr + 1 > data_end)
			return -1;
		switch (next_hdr_type) {
		case IPPROTO_HOPOPTS:
		case IPPROTO_DSTOPTS:
		case IPPROTO_ROUTING:
		case IPPROTO_MH:
			nh->pos = (char *)hdr + (hdr->hdrlen + 1) * 8;
			next_hdr_type = hdr->nexthdr;
			break;
		case IPPROTO_AH:
			nh->pos = (char *)hdr + (hdr->hdrlen + 2) * 4;
			next_hdr_type = hdr->nexthdr;
			break;
		case IPPROTO_FRAGMENT:
			nh->pos = (char *)hdr + 8;
			next_hdr_type = hdr->nexthdr;
			break;
		default:
			return next_hdr_type;
		}
	}
	return -1;
}

SEC("xdp")
int xdp_ipv6_ext(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct hdr_cursor nh = { .pos = data };
	struct ethhdr *eth;
	struct ipv6hdr *ip6h;
	int t;

	if (parse_ethhdr(&nh, data_end, &eth) != bpf_htons(ETH_P_IPV6))
		return XDP_PASS;
	t = parse_ip6hdr(&nh, data_end, &ip6h);
	if (t < 0)
		return XDP_ABORTED;
	t = skip_ip6hdrext(&nh, data_end, t);
	if (t == IPPROTO_ICMPV6)
		return XDP_DROP;
	return XDP_PASS;
}

SEC("xdp")
int xdp_sum_bytes(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *p = (void *)(long)ctx->data;
	__u32 key = 0;
	__u64 *v, sum = 0;
	int i;

#pragma clang loop unroll(disable)
	for (i = 0; i < 64; i++) {
		if ((void *)(p + i + 1) > data_end)
			break;
		sum += p[i];
	}
	v = bpf_map_lookup_elem(&sums, &key);
	if (!v)
		return XDP_PASS;
#pragma clang loop unroll(disable)
	for (i = 0; i < 32; i++)
		v[i] += sum >> i;
	return sum & 1 ? XDP_PASS : XDP_DROP;
}

static __always_inline __u16 csum_fold_helper(__u64 csum)
{
	int i;
#pragma unroll
	for (i = 0; i < 4; i++) {
		if (csum >> 16)
			csum = (csum & 0xffff) + (csum >> 16);
	}
	return ~csum;
}

SEC("xdp")
int xdp_csum(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct ethhdr *eth = data;
	struct iphdr *iph = data + sizeof(*eth);
	__u32 old_daddr, new_daddr = bpf_htonl(0x0a000001);
	__s64 csum;

	if ((void *)(iph + 1) > data_end)
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	old_daddr = iph->daddr;
	csum = bpf_csum_diff(&old_daddr, 4, &new_daddr, 4, ~((__u32)iph->check));
	iph->daddr = new_daddr;
	iph->check = csum_fold_helper(csum);
	csum = bpf_csum_diff(0, 0, (void *)iph, sizeof(*iph), 0);
	if (csum_fold_helper(csum) != 0)
		bpf_printk("bad csum %d", (int)csum);
	return XDP_TX;
}

SEC("xdp")
int xdp_sample(struct xdp_md *ctx)
{
	__u64 t0 = bpf_ktime_get_ns();
	__u32 cpu = bpf_get_smp_processor_id();
	if ((bpf_get_prandom_u32() & 1023) == 0)
		bpf_printk("cpu %u queue %u t %llu", cpu, ctx->rx_queue_index, bpf_ktime_get_boot_ns() - t0);
	return XDP_PASS;
}
"#;

/// Every corpus program: (name, C source).
pub const ALL: &[(&str, &str)] =
    &[("firewall", FIREWALL), ("redirect", REDIRECT), ("encap", ENCAP), ("router", ROUTER), ("globals", GLOBALS), ("loops", LOOPS)];
