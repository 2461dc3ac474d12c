//! Prototypes of the helper functions sluice's runtime implements for XDP programs.
//! A helper id not in this table is refused: the runtime could not call it anyway, and
//! its arguments could not be checked.

use crate::program::map_type;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Arg {
    /// Not an argument (must not be relied upon; clobbered by the call).
    None,
    /// Any initialised scalar (pointers would leak addresses into the helper).
    Anything,
    /// Anything, even uninitialised or a pointer: trace_printk's variadic arguments (the
    /// runtime formats `%s` through checked accesses, like the kernel's privileged mode).
    AnythingOrUninit,
    /// A map pointer from `lddw` (the allowed map types depend on the helper).
    MapPtr,
    /// Readable memory of the map's key size.
    MapKey,
    /// Readable memory of the map's value size.
    MapValue,
    /// The program's context pointer, unmodified.
    Ctx,
    /// Readable memory; its size is the next argument.
    Mem,
    /// Like `Mem`, or a NULL scalar with a zero size.
    MemOrNull,
    /// Readable and writable memory on the stack or in a map value; size is the next argument.
    MemRw,
    /// Memory the helper only writes (may be uninitialised) on the stack or in a map value;
    /// size is the next argument.
    MemWrite,
    /// Like `MemOrNull`, but spilled pointers may be read (trace_vprintk's argument array).
    PrintkArgs,
    /// A bounded size > 0 for the previous argument.
    Size,
    /// A bounded size >= 0, known to be a multiple of 4 (csum_diff).
    SizeOrZeroMult4,
    /// A bounded size >= 0.
    SizeOrZero,
    /// A constant size >= 64 (struct bpf_fib_lookup).
    FibSize,
    /// A constant size >= 0 of memory the helper allocates (ringbuf_reserve).
    AllocSize,
    /// A ring buffer record from `bpf_ringbuf_reserve`, unmodified: released by the call.
    RingbufRelease,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Ret {
    /// An unknown 64-bit scalar.
    Scalar,
    /// A zero-extended 32-bit scalar.
    U32,
    /// A pointer to a value of the map argument, or NULL.
    MapValueOrNull,
    /// A ring buffer record of the size argument, or NULL; acquires a reference.
    RingbufMemOrNull,
    /// Nothing (R0 is left uninitialised).
    Void,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum MapUse {
    None,
    /// map_lookup_elem: data maps, plus device/socket maps (read-only values).
    Lookup,
    /// update/delete: data maps only.
    Data,
    /// redirect_map: device, cpu and socket maps.
    Redirect,
    /// map_lookup_percpu_elem: per-CPU data maps.
    Percpu,
    /// perf_event_output: perf event arrays.
    PerfEvent,
    /// tail_call: program arrays.
    ProgArray,
    /// ringbuf_output / reserve / query: ring buffers.
    Ringbuf,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Proto {
    pub name: &'static str,
    pub args: [Arg; 5],
    pub ret: Ret,
    /// May move packet data or data_end: all packet pointers become invalid.
    pub changes_pkt: bool,
    pub maps: MapUse,
}

impl Proto {
    /// Number of leading argument registers the helper reads.
    pub fn nargs(&self) -> usize {
        self.args.iter().take_while(|a| **a != Arg::None).count()
    }
}

const fn p(name: &'static str, args: [Arg; 5], ret: Ret, changes_pkt: bool, maps: MapUse) -> Proto {
    Proto { name, args, ret, changes_pkt, maps }
}

use Arg::*;

/// The id of `bpf_tail_call`.
pub(crate) const TAIL_CALL: i32 = 12;

pub(crate) fn proto(id: i32) -> Option<Proto> {
    let n = None;
    Some(match id {
        1 => p("bpf_map_lookup_elem", [MapPtr, MapKey, n, n, n], Ret::MapValueOrNull, false, MapUse::Lookup),
        2 => p("bpf_map_update_elem", [MapPtr, MapKey, MapValue, Anything, n], Ret::Scalar, false, MapUse::Data),
        3 => p("bpf_map_delete_elem", [MapPtr, MapKey, n, n, n], Ret::Scalar, false, MapUse::Data),
        5 => p("bpf_ktime_get_ns", [n; 5], Ret::Scalar, false, MapUse::None),
        6 => p("bpf_trace_printk", [Mem, Size, AnythingOrUninit, AnythingOrUninit, AnythingOrUninit], Ret::Scalar, false, MapUse::None),
        7 => p("bpf_get_prandom_u32", [n; 5], Ret::U32, false, MapUse::None),
        8 => p("bpf_get_smp_processor_id", [n; 5], Ret::U32, false, MapUse::None),
        // Does not return when it succeeds (the target runs in its place; in a subprogram,
        // the target returns to the subprogram's caller: `Verifier::tail_call_returns`); on
        // a failure (index past the end, empty slot, 33 calls made) the program goes on.
        // Changes packet data: the program it runs may have, and a tail call from a
        // subprogram returns to its caller (the kernel since 6.13, "tail calls invalidate
        // packet pointers").
        TAIL_CALL => p("bpf_tail_call", [Ctx, MapPtr, Anything, n, n], Ret::Scalar, true, MapUse::ProgArray),
        23 => p("bpf_redirect", [Anything, Anything, n, n, n], Ret::Scalar, false, MapUse::None),
        28 => p("bpf_csum_diff", [MemOrNull, SizeOrZeroMult4, MemOrNull, SizeOrZeroMult4, Anything], Ret::Scalar, false, MapUse::None),
        44 => p("bpf_xdp_adjust_head", [Ctx, Anything, n, n, n], Ret::Scalar, true, MapUse::None),
        51 => p("bpf_redirect_map", [MapPtr, Anything, Anything, n, n], Ret::Scalar, false, MapUse::Redirect),
        54 => p("bpf_xdp_adjust_meta", [Ctx, Anything, n, n, n], Ret::Scalar, true, MapUse::None),
        65 => p("bpf_xdp_adjust_tail", [Ctx, Anything, n, n, n], Ret::Scalar, true, MapUse::None),
        69 => p("bpf_fib_lookup", [Ctx, MemRw, FibSize, Anything, n], Ret::Scalar, false, MapUse::None),
        125 => p("bpf_ktime_get_boot_ns", [n; 5], Ret::Scalar, false, MapUse::None),
        // Also provided by sluice's runtime (beyond the kernel's classic XDP set).
        160 => p("bpf_ktime_get_coarse_ns", [n; 5], Ret::Scalar, false, MapUse::None),
        177 => p("bpf_trace_vprintk", [Mem, Size, PrintkArgs, SizeOrZero, n], Ret::Scalar, false, MapUse::None),
        188 => p("bpf_xdp_get_buff_len", [Ctx, n, n, n, n], Ret::Scalar, false, MapUse::None),
        189 => p("bpf_xdp_load_bytes", [Ctx, Anything, MemWrite, Size, n], Ret::Scalar, false, MapUse::None),
        // Writes packet bytes in place; data and data_end do not move.
        190 => p("bpf_xdp_store_bytes", [Ctx, Anything, Mem, Size, n], Ret::Scalar, false, MapUse::None),
        25 => p("bpf_perf_event_output", [Ctx, MapPtr, Anything, Mem, SizeOrZero], Ret::Scalar, false, MapUse::PerfEvent),
        130 => p("bpf_ringbuf_output", [MapPtr, Mem, SizeOrZero, Anything, n], Ret::Scalar, false, MapUse::Ringbuf),
        131 => p("bpf_ringbuf_reserve", [MapPtr, AllocSize, Anything, n, n], Ret::RingbufMemOrNull, false, MapUse::Ringbuf),
        132 => p("bpf_ringbuf_submit", [RingbufRelease, Anything, n, n, n], Ret::Void, false, MapUse::None),
        133 => p("bpf_ringbuf_discard", [RingbufRelease, Anything, n, n, n], Ret::Void, false, MapUse::None),
        134 => p("bpf_ringbuf_query", [MapPtr, Anything, n, n, n], Ret::Scalar, false, MapUse::Ringbuf),
        195 => p("bpf_map_lookup_percpu_elem", [MapPtr, MapKey, Anything, n, n], Ret::MapValueOrNull, false, MapUse::Percpu),
        _ => return Option::None,
    })
}

pub(crate) fn is_data_map(t: u32) -> bool {
    matches!(
        t,
        map_type::HASH | map_type::ARRAY | map_type::PERCPU_HASH | map_type::PERCPU_ARRAY | map_type::LRU_HASH | map_type::LRU_PERCPU_HASH
    )
}

pub(crate) fn is_known_map(t: u32) -> bool {
    is_data_map(t)
        || matches!(
            t,
            map_type::DEVMAP
                | map_type::DEVMAP_HASH
                | map_type::CPUMAP
                | map_type::XSKMAP
                | map_type::PERF_EVENT_ARRAY
                | map_type::RINGBUF
                | map_type::PROG_ARRAY
                | map_type::ARRAY_OF_MAPS
                | map_type::HASH_OF_MAPS
        )
}

pub(crate) fn map_allowed(use_: MapUse, t: u32) -> bool {
    match use_ {
        MapUse::None => false,
        MapUse::Data => is_data_map(t),
        MapUse::Lookup => {
            is_data_map(t)
                || matches!(
                    t,
                    map_type::DEVMAP | map_type::DEVMAP_HASH | map_type::XSKMAP | map_type::ARRAY_OF_MAPS | map_type::HASH_OF_MAPS
                )
        }
        MapUse::Redirect => {
            matches!(t, map_type::DEVMAP | map_type::DEVMAP_HASH | map_type::CPUMAP | map_type::XSKMAP)
        }
        MapUse::Percpu => matches!(t, map_type::PERCPU_ARRAY | map_type::PERCPU_HASH | map_type::LRU_PERCPU_HASH),
        MapUse::PerfEvent => t == map_type::PERF_EVENT_ARRAY,
        MapUse::Ringbuf => t == map_type::RINGBUF,
        MapUse::ProgArray => t == map_type::PROG_ARRAY,
    }
}

/// BPF_F_RDONLY_PROG: the program may read but not write the map's values (.rodata).
pub(crate) const BPF_F_RDONLY_PROG: u32 = 1 << 7;
/// BPF_F_WRONLY_PROG: the program may write but not read the map's values.
pub(crate) const BPF_F_WRONLY_PROG: u32 = 1 << 8;

pub(crate) fn map_value_writeonly(flags: u32) -> bool {
    flags & BPF_F_WRONLY_PROG != 0
}

/// Values the program may not write: read-only maps and device/socket maps, whose values
/// the runtime owns.
pub(crate) fn map_value_readonly(t: u32, flags: u32) -> bool {
    flags & BPF_F_RDONLY_PROG != 0 || !is_data_map(t)
}

/// Kernel helper names (enum bpf_func_id order, from libbpf's bpf_helper_defs.h), for messages.
const HELPER_NAMES: &[&str] = &[
    "",
    "bpf_map_lookup_elem",
    "bpf_map_update_elem",
    "bpf_map_delete_elem",
    "bpf_probe_read",
    "bpf_ktime_get_ns",
    "bpf_trace_printk",
    "bpf_get_prandom_u32",
    "bpf_get_smp_processor_id",
    "bpf_skb_store_bytes",
    "bpf_l3_csum_replace",
    "bpf_l4_csum_replace",
    "bpf_tail_call",
    "bpf_clone_redirect",
    "bpf_get_current_pid_tgid",
    "bpf_get_current_uid_gid",
    "bpf_get_current_comm",
    "bpf_get_cgroup_classid",
    "bpf_skb_vlan_push",
    "bpf_skb_vlan_pop",
    "bpf_skb_get_tunnel_key",
    "bpf_skb_set_tunnel_key",
    "bpf_perf_event_read",
    "bpf_redirect",
    "bpf_get_route_realm",
    "bpf_perf_event_output",
    "bpf_skb_load_bytes",
    "bpf_get_stackid",
    "bpf_csum_diff",
    "bpf_skb_get_tunnel_opt",
    "bpf_skb_set_tunnel_opt",
    "bpf_skb_change_proto",
    "bpf_skb_change_type",
    "bpf_skb_under_cgroup",
    "bpf_get_hash_recalc",
    "bpf_get_current_task",
    "bpf_probe_write_user",
    "bpf_current_task_under_cgroup",
    "bpf_skb_change_tail",
    "bpf_skb_pull_data",
    "bpf_csum_update",
    "bpf_set_hash_invalid",
    "bpf_get_numa_node_id",
    "bpf_skb_change_head",
    "bpf_xdp_adjust_head",
    "bpf_probe_read_str",
    "bpf_get_socket_cookie",
    "bpf_get_socket_uid",
    "bpf_set_hash",
    "bpf_setsockopt",
    "bpf_skb_adjust_room",
    "bpf_redirect_map",
    "bpf_sk_redirect_map",
    "bpf_sock_map_update",
    "bpf_xdp_adjust_meta",
    "bpf_perf_event_read_value",
    "bpf_perf_prog_read_value",
    "bpf_getsockopt",
    "bpf_override_return",
    "bpf_sock_ops_cb_flags_set",
    "bpf_msg_redirect_map",
    "bpf_msg_apply_bytes",
    "bpf_msg_cork_bytes",
    "bpf_msg_pull_data",
    "bpf_bind",
    "bpf_xdp_adjust_tail",
    "bpf_skb_get_xfrm_state",
    "bpf_get_stack",
    "bpf_skb_load_bytes_relative",
    "bpf_fib_lookup",
    "bpf_sock_hash_update",
    "bpf_msg_redirect_hash",
    "bpf_sk_redirect_hash",
    "bpf_lwt_push_encap",
    "bpf_lwt_seg6_store_bytes",
    "bpf_lwt_seg6_adjust_srh",
    "bpf_lwt_seg6_action",
    "bpf_rc_repeat",
    "bpf_rc_keydown",
    "bpf_skb_cgroup_id",
    "bpf_get_current_cgroup_id",
    "bpf_get_local_storage",
    "bpf_sk_select_reuseport",
    "bpf_skb_ancestor_cgroup_id",
    "bpf_sk_lookup_tcp",
    "bpf_sk_lookup_udp",
    "bpf_sk_release",
    "bpf_map_push_elem",
    "bpf_map_pop_elem",
    "bpf_map_peek_elem",
    "bpf_msg_push_data",
    "bpf_msg_pop_data",
    "bpf_rc_pointer_rel",
    "bpf_spin_lock",
    "bpf_spin_unlock",
    "bpf_sk_fullsock",
    "bpf_tcp_sock",
    "bpf_skb_ecn_set_ce",
    "bpf_get_listener_sock",
    "bpf_skc_lookup_tcp",
    "bpf_tcp_check_syncookie",
    "bpf_sysctl_get_name",
    "bpf_sysctl_get_current_value",
    "bpf_sysctl_get_new_value",
    "bpf_sysctl_set_new_value",
    "bpf_strtol",
    "bpf_strtoul",
    "bpf_sk_storage_get",
    "bpf_sk_storage_delete",
    "bpf_send_signal",
    "bpf_tcp_gen_syncookie",
    "bpf_skb_output",
    "bpf_probe_read_user",
    "bpf_probe_read_kernel",
    "bpf_probe_read_user_str",
    "bpf_probe_read_kernel_str",
    "bpf_tcp_send_ack",
    "bpf_send_signal_thread",
    "bpf_jiffies64",
    "bpf_read_branch_records",
    "bpf_get_ns_current_pid_tgid",
    "bpf_xdp_output",
    "bpf_get_netns_cookie",
    "bpf_get_current_ancestor_cgroup_id",
    "bpf_sk_assign",
    "bpf_ktime_get_boot_ns",
    "bpf_seq_printf",
    "bpf_seq_write",
    "bpf_sk_cgroup_id",
    "bpf_sk_ancestor_cgroup_id",
    "bpf_ringbuf_output",
    "bpf_ringbuf_reserve",
    "bpf_ringbuf_submit",
    "bpf_ringbuf_discard",
    "bpf_ringbuf_query",
    "bpf_csum_level",
    "bpf_skc_to_tcp6_sock",
    "bpf_skc_to_tcp_sock",
    "bpf_skc_to_tcp_timewait_sock",
    "bpf_skc_to_tcp_request_sock",
    "bpf_skc_to_udp6_sock",
    "bpf_get_task_stack",
    "bpf_load_hdr_opt",
    "bpf_store_hdr_opt",
    "bpf_reserve_hdr_opt",
    "bpf_inode_storage_get",
    "bpf_inode_storage_delete",
    "bpf_d_path",
    "bpf_copy_from_user",
    "bpf_snprintf_btf",
    "bpf_seq_printf_btf",
    "bpf_skb_cgroup_classid",
    "bpf_redirect_neigh",
    "bpf_per_cpu_ptr",
    "bpf_this_cpu_ptr",
    "bpf_redirect_peer",
    "bpf_task_storage_get",
    "bpf_task_storage_delete",
    "bpf_get_current_task_btf",
    "bpf_bprm_opts_set",
    "bpf_ktime_get_coarse_ns",
    "bpf_ima_inode_hash",
    "bpf_sock_from_file",
    "bpf_check_mtu",
    "bpf_for_each_map_elem",
    "bpf_snprintf",
    "bpf_sys_bpf",
    "bpf_btf_find_by_name_kind",
    "bpf_sys_close",
    "bpf_timer_init",
    "bpf_timer_set_callback",
    "bpf_timer_start",
    "bpf_timer_cancel",
    "bpf_get_func_ip",
    "bpf_get_attach_cookie",
    "bpf_task_pt_regs",
    "bpf_get_branch_snapshot",
    "bpf_trace_vprintk",
    "bpf_skc_to_unix_sock",
    "bpf_kallsyms_lookup_name",
    "bpf_find_vma",
    "bpf_loop",
    "bpf_strncmp",
    "bpf_get_func_arg",
    "bpf_get_func_ret",
    "bpf_get_func_arg_cnt",
    "bpf_get_retval",
    "bpf_set_retval",
    "bpf_xdp_get_buff_len",
    "bpf_xdp_load_bytes",
    "bpf_xdp_store_bytes",
    "bpf_copy_from_user_task",
    "bpf_skb_set_tstamp",
    "bpf_ima_file_hash",
    "bpf_kptr_xchg",
    "bpf_map_lookup_percpu_elem",
    "bpf_skc_to_mptcp_sock",
    "bpf_dynptr_from_mem",
    "bpf_ringbuf_reserve_dynptr",
    "bpf_ringbuf_submit_dynptr",
    "bpf_ringbuf_discard_dynptr",
    "bpf_dynptr_read",
    "bpf_dynptr_write",
    "bpf_dynptr_data",
    "bpf_tcp_raw_gen_syncookie_ipv4",
    "bpf_tcp_raw_gen_syncookie_ipv6",
    "bpf_tcp_raw_check_syncookie_ipv4",
    "bpf_tcp_raw_check_syncookie_ipv6",
    "bpf_ktime_get_tai_ns",
    "bpf_user_ringbuf_drain",
    "bpf_cgrp_storage_get",
    "bpf_cgrp_storage_delete",
];

pub(crate) fn helper_name(id: i32) -> Option<&'static str> {
    usize::try_from(id).ok().and_then(|i| HELPER_NAMES.get(i)).copied().filter(|n| !n.is_empty())
}
