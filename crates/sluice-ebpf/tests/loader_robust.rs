//! The loader on malformed objects: real clang objects from bpf/obj with one field
//! corrupted each. Every case must be a clear `Err` naming what is wrong, never a panic,
//! and nothing may be printed (no panic-hook text).

use sluice_ebpf::{load_and_verify, LoadError, Object};
use std::path::PathBuf;

fn obj_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bpf/obj").join(name)
}

fn bytes(name: &str) -> Vec<u8> {
    std::fs::read(obj_path(name)).unwrap()
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes(b[o..o + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

/// A section header's file offset and its fields this test needs (ELF64 little-endian).
struct Sec {
    hdr: usize,
    name: String,
    ty: u32,
    offset: usize,
    size: usize,
    link: usize,
}

fn sections(b: &[u8]) -> Vec<Sec> {
    let shoff = u64_at(b, 0x28) as usize;
    let shnum = u16_at(b, 0x3c) as usize;
    let shstrndx = u16_at(b, 0x3e) as usize;
    let raw: Vec<(usize, u32, u32, usize, usize, usize)> = (0..shnum)
        .map(|i| {
            let h = shoff + i * 64;
            (h, u32_at(b, h), u32_at(b, h + 4), u64_at(b, h + 0x18) as usize, u64_at(b, h + 0x20) as usize, u32_at(b, h + 0x28) as usize)
        })
        .collect();
    let strtab = raw[shstrndx].3;
    raw.iter()
        .map(|&(hdr, name, ty, offset, size, link)| {
            let s = &b[strtab + name as usize..];
            let end = s.iter().position(|&c| c == 0).unwrap();
            Sec { hdr, name: String::from_utf8(s[..end].to_vec()).unwrap(), ty, offset, size, link }
        })
        .collect()
}

fn section<'a>(secs: &'a [Sec], name: &str) -> &'a Sec {
    secs.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no section {name}"))
}

/// Loads `b` and returns the error text; fails the test on success.
fn load_err(b: &[u8]) -> String {
    match Object::from_bytes(b) {
        Ok(_) => panic!("a corrupted object loaded"),
        Err(e) => {
            // The fuzz entry point must agree.
            assert!(load_and_verify(b).is_err());
            e.to_string()
        }
    }
}

#[test]
fn symbol_running_past_its_section_is_named() {
    let mut b = bytes("xdp_macswap_tx.o");
    let secs = sections(&b);
    let symtab = secs.iter().find(|s| s.ty == 2).unwrap();
    let strtab = &secs.iter().map(|s| s.offset).collect::<Vec<_>>()[symtab.link];
    // The program's function symbol: STT_FUNC (2) in section `xdp`.
    let xdp_idx = secs.iter().position(|s| s.name == "xdp").unwrap() as u16;
    let sym = (0..symtab.size / 24).map(|i| symtab.offset + i * 24).find(|&s| b[s + 4] & 0xf == 2 && u16_at(&b, s + 6) == xdp_idx).unwrap();
    let name_off = u32_at(&b, sym) as usize;
    let name: String = b[strtab + name_off..].iter().take_while(|&&c| c != 0).map(|&c| c as char).collect();
    assert_eq!(name, "xdp_macswap_tx");
    let size = secs[xdp_idx as usize].size as u64;
    b[sym + 16..sym + 24].copy_from_slice(&(size + 8).to_le_bytes());
    let e = load_err(&b);
    assert!(e.contains("symbol `xdp_macswap_tx` crosses the end of section `xdp`"), "{e}");
}

#[test]
fn btf_lengths_past_the_section_are_refused() {
    let orig = bytes("xdp_drop_count.o");
    let secs = sections(&orig);
    let btf = section(&secs, ".BTF");
    // str_len (header offset 20) and type_len (12) each made to run past the end.
    for field in [12usize, 20] {
        let mut b = orig.clone();
        let at = btf.offset + field;
        let v = u32_at(&b, at) + btf.size as u32;
        b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        let e = load_err(&b);
        assert!(e.contains("section `.BTF`") && e.contains("runs past the end"), "{e}");
    }
    // A header length larger than the section.
    let mut b = orig.clone();
    b[btf.offset + 4..btf.offset + 8].copy_from_slice(&(btf.size as u32 + 1).to_le_bytes());
    assert!(load_err(&b).contains("header length"));
    // A type record whose member count runs past the type area.
    let mut b = orig.clone();
    let types = btf.offset + u32_at(&orig, btf.offset + 4) as usize + u32_at(&orig, btf.offset + 8) as usize;
    b[types + 4..types + 6].copy_from_slice(&0xffffu16.to_le_bytes());
    b[types + 7] = 4; // STRUCT with 65535 members
    let e = load_err(&b);
    assert!(e.contains("type 1: record runs past the end"), "{e}");
    // .BTF.ext func info past its section.
    let ext = section(&secs, ".BTF.ext");
    let mut b = orig.clone();
    b[ext.offset + 12..ext.offset + 16].copy_from_slice(&(ext.size as u32 * 2).to_le_bytes());
    let e = load_err(&b);
    assert!(e.contains("section `.BTF.ext`: func info"), "{e}");
}

#[test]
fn truncated_files_are_refused_at_every_length() {
    let b = bytes("xdp_proto_count.o");
    // Every prefix: the section table is at the end, so each is refused, none panics.
    for len in (0..b.len()).step_by(7).chain([b.len() - 1]) {
        let e = load_err(&b[..len]);
        assert!(e.starts_with("malformed object: "), "len {len}: {e}");
        assert!(!e.contains("ELF parser failed"), "len {len} reached aya-obj: {e}");
    }
}

#[test]
fn section_offset_past_the_end_is_refused() {
    let mut b = bytes("xdp_ipip_encap.o");
    let secs = sections(&b);
    let ro = section(&secs, ".rodata");
    let past = b.len() as u64 + 16;
    b[ro.hdr + 0x18..ro.hdr + 0x20].copy_from_slice(&past.to_le_bytes());
    let e = load_err(&b);
    assert!(e.contains("run past the end of the file"), "{e}");
    // A size that overflows offset + size.
    let mut b = bytes("xdp_ipip_encap.o");
    b[ro.hdr + 0x20..ro.hdr + 0x28].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(load_err(&b).contains("run past the end of the file"));
}

#[test]
fn relocation_outside_its_section_is_refused() {
    let mut b = bytes("xdp_drop_count.o");
    let secs = sections(&b);
    let rel = section(&secs, ".relxdp");
    let target = section(&secs, "xdp");
    b[rel.offset..rel.offset + 8].copy_from_slice(&(target.size as u64).to_le_bytes());
    let e = load_err(&b);
    assert!(e.contains("relocation 0 of `.relxdp`") && e.contains("not inside section `xdp`"), "{e}");
    let mut b = bytes("xdp_drop_count.o");
    b[rel.offset + 12..rel.offset + 16].copy_from_slice(&0xffffu32.to_le_bytes());
    assert!(load_err(&b).contains("symbol 65535 does not exist"));
}

/// Byte flips all over a real object: each load is an error or a loaded object; none panics
/// (the test harness fails on a panic, and `load_err` is not used: some flips are harmless).
#[test]
fn flipped_bytes_never_panic() {
    for name in ["xdp_globals.o", "xdp_proto_count.o", "xdp_devmap_redirect.o"] {
        let orig = bytes(name);
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..1500 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut b = orig.clone();
            let at = (seed % b.len() as u64) as usize;
            b[at] ^= (seed >> 32) as u8 | 1;
            let _ = load_and_verify(&b);
        }
    }
}

#[test]
fn every_committed_object_still_loads() {
    for entry in std::fs::read_dir(obj_path("")).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|x| x == "o") {
            let o = Object::from_file(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert!(o.select_xdp(None, true).is_ok(), "{}", p.display());
        }
    }
}

#[test]
fn malformed_is_an_error_variant_not_a_panic_message() {
    let e = Object::from_bytes(b"\x7fELF\x02\x01\x01").unwrap_err();
    assert!(matches!(e, LoadError::Invalid(_)), "{e:?}");
    assert!(e.to_string().contains("shorter than an ELF header"));
}

/// Program selection as libbpf / iproute2 / bpftool: XDP next to tc and tracing programs,
/// and legacy section names aya-obj alone refuses.
mod selection {
    use super::*;
    use sluice_ebpf::{section_kind, SectionKind, SelectError};

    #[test]
    fn mixed_object_lists_every_program_and_picks_the_first_xdp() {
        let o = Object::from_file(obj_path("xdp_mixed_types.o")).unwrap();
        let got: Vec<(&str, &str)> = o.programs.iter().map(|p| (p.section.as_str(), p.name.as_str())).collect();
        assert_eq!(
            got,
            [
                ("tc", "tc_count"),
                ("tracepoint/syscalls/sys_enter_write", "trace_write"),
                ("xdp/pass", "xdp_pass_count"),
                ("kprobe/do_nanosleep", "probe_nanosleep"),
                ("xdp.frags/devmap", "xdp_devmap_pass"),
                ("xdp/cpumap", "xdp_cpumap_pass"),
            ]
        );
        assert_eq!(o.select_xdp(None, false).unwrap().name, "xdp_pass_count");
        assert_eq!(o.select_xdp(Some("xdp/cpumap"), false).unwrap().name, "xdp_cpumap_pass");
        let frags = o.select_xdp(Some("xdp_devmap_pass"), false).unwrap();
        assert!(frags.frags_aware() && frags.is_xdp());
        assert_eq!(
            o.select_xdp(Some("tc"), false).unwrap_err(),
            SelectError::NotXdp { name: "tc_count".into(), section: "tc".into(), kind: "sched_cls" }
        );
        // bpftool's `type xdp` loads it as XDP anyway.
        assert_eq!(o.select_xdp(Some("tc"), true).unwrap().name, "tc_count");
        let e = o.select_xdp(Some("nope"), false).unwrap_err().to_string();
        assert!(e.contains("no program or section `nope`") && e.contains("kprobe/do_nanosleep (probe_nanosleep, kprobe)"), "{e}");
    }

    #[test]
    fn legacy_section_names_need_a_name_or_the_type() {
        let o = Object::from_file(obj_path("xdp_legacy_sections.o")).unwrap();
        assert_eq!(o.program_names(), ["xdp_prog_drop_arp", "xdp_sock_pass", "xdp_icmp_echo_func"]);
        let e = o.select_xdp(None, false).unwrap_err().to_string();
        assert!(e.starts_with("no XDP program in this object; sections: prog (xdp_prog_drop_arp, unknown), xdp_sock"), "{e}");
        assert_eq!(o.select_xdp(Some("xdp_icmp_echo"), false).unwrap().name, "xdp_icmp_echo_func");
        assert_eq!(o.select_xdp(Some("xdp_sock"), false).unwrap().name, "xdp_sock_pass");
        assert_eq!(o.select_xdp(None, true).unwrap().name, "xdp_prog_drop_arp");
    }

    #[test]
    fn section_kinds_follow_libbpf_names() {
        for (s, k) in [
            ("xdp", SectionKind::Xdp { frags: false }),
            ("xdp/pass", SectionKind::Xdp { frags: false }),
            ("xdp/devmap", SectionKind::Xdp { frags: false }),
            ("xdp.frags", SectionKind::Xdp { frags: true }),
            ("xdp.frags/cpumap", SectionKind::Xdp { frags: true }),
            ("xdp_sock", SectionKind::Unknown),
            ("prog", SectionKind::Unknown),
            ("tc", SectionKind::Other("sched_cls")),
            ("classifier", SectionKind::Other("sched_cls")),
            ("kprobe/x", SectionKind::Other("kprobe")),
            ("tp/a/b", SectionKind::Other("tracepoint")),
        ] {
            assert_eq!(section_kind(s), k, "{s}");
        }
    }
}

/// A struct member's name offset past the BTF strings (aya-obj would index past its string
/// table): refused, naming the type.
#[test]
fn btf_member_name_outside_the_strings_is_refused() {
    let mut b = bytes("xdp_drop_count.o");
    let secs = sections(&b);
    let btf = section(&secs, ".BTF");
    let hdr = u32_at(&b, btf.offset + 4) as usize;
    let (types, type_len) = (btf.offset + hdr + u32_at(&b, btf.offset + 8) as usize, u32_at(&b, btf.offset + 12) as usize);
    let (mut at, mut id) = (types, 1);
    let member = loop {
        assert!(at < types + type_len, "no struct with members in the BTF");
        let info = u32_at(&b, at + 4);
        let (kind, vlen) = ((info >> 24) & 0x1f, (info & 0xffff) as usize);
        if kind == 4 && vlen > 0 {
            break at + 12;
        }
        at += 12
            + match kind {
                1 | 14 | 17 => 4,
                3 => 12,
                4 | 5 | 15 | 19 => vlen * 12,
                6 | 13 => vlen * 8,
                _ => 0,
            };
        id += 1;
    };
    b[member..member + 4].copy_from_slice(&0x00ff_ffffu32.to_le_bytes());
    let e = load_err(&b);
    assert!(e.contains(&format!("type {id}: member name offset 16777215 outside the string area")), "{e}");
}
