//! pcap files: replay a capture as a receive port, record transmitted frames as a capture.
//!
//! Input is pcap (either byte order, µs or ns timestamps) or pcapng (enhanced and simple packet
//! blocks on Ethernet interfaces). Records shorter than the frame they saw (`tcpdump -s 96`:
//! caplen < orig_len) are taken as captured and counted as truncated. Output is written one
//! tx burst at a time; a record the file refuses is a transmit error, never a success.

use super::{Port, PortStats};
use crate::buf::chain::MAX_CHAIN_BYTES;
use crate::buf::{BufCache, Pkt};
use pcap_file::pcap::{PcapHeader, PcapParser};
use pcap_file::pcapng::{Block, PcapNgParser};
use pcap_file::{DataLink, PcapError as FormatError};
use std::fs::File;
use std::io::{Seek, Write};
use std::path::Path;

/// tcpdump's largest snapshot length: what a capture record may hold.
pub const MAX_SNAPLEN: u32 = 262_144;

#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    #[error("pcap {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("pcap {path}: {msg}")]
    Format { path: String, msg: String },
}

/// The frames of a capture, as the file holds them.
#[derive(Debug, Default, Clone)]
pub struct Capture {
    pub frames: Vec<Vec<u8>>,
    /// Records that hold fewer bytes than the frame had on the wire (caplen < orig_len).
    pub truncated: u64,
    /// Per frame: whether its record was cut that way.
    pub cut: Vec<bool>,
}

impl Capture {
    fn push(&mut self, frame: Vec<u8>, cut: bool) {
        self.frames.push(frame);
        self.cut.push(cut);
        self.truncated += u64::from(cut);
    }
}

const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

/// Reads every frame of a pcap or pcapng file (Ethernet link type).
pub fn read_capture(path: &Path) -> Result<Capture, PcapError> {
    let p = path.display().to_string();
    let fmt = |msg: String| PcapError::Format { path: p.clone(), msg };
    if path.is_dir() {
        return Err(fmt("is a directory, not a capture file".into()));
    }
    let bytes = std::fs::read(path).map_err(|source| PcapError::Io { path: p.clone(), source })?;
    if bytes.is_empty() {
        return Err(fmt("empty file (no pcap header)".into()));
    }
    if bytes.starts_with(&PCAPNG_MAGIC) {
        parse_pcapng(&bytes).map_err(fmt)
    } else {
        parse_pcap(&bytes).map_err(fmt)
    }
}

/// Loads all frames of a capture (see [`read_capture`]).
pub fn read_frames(path: &Path) -> Result<Vec<Vec<u8>>, PcapError> {
    Ok(read_capture(path)?.frames)
}

fn format_msg(e: &FormatError) -> String {
    match e {
        FormatError::IncompleteBuffer => "the file ends inside a record".into(),
        FormatError::InvalidField(f) => f.trim_start_matches("PcapHeader: ").trim_start_matches("PacketHeader ").to_string(),
        other => other.to_string(),
    }
}

/// Classic pcap. The crate's record check refuses orig_len > snaplen, which every
/// `tcpdump -s N` capture of longer frames has: records are read raw and checked here.
pub fn parse_pcap(bytes: &[u8]) -> Result<Capture, String> {
    if bytes.len() < 24 {
        return Err(format!("{} bytes: too short for a pcap header (24 bytes)", bytes.len()));
    }
    let (mut rest, parser) = PcapParser::new(bytes).map_err(|e| format!("not a pcap or pcapng file ({})", format_msg(&e)))?;
    let header = parser.header();
    if header.datalink != DataLink::ETHERNET {
        return Err(format!("link type {:?} is not Ethernet", header.datalink));
    }
    let mut cap = Capture::default();
    while !rest.is_empty() {
        let at = bytes.len() - rest.len();
        let n = cap.frames.len();
        let (next, raw) = parser.next_raw_packet(rest).map_err(|e| format!("record {n} at byte {at}: {}", format_msg(&e)))?;
        if raw.incl_len > MAX_SNAPLEN {
            return Err(format!("record {n} at byte {at}: {} captured bytes (more than {MAX_SNAPLEN})", raw.incl_len));
        }
        if raw.incl_len > raw.orig_len {
            // The record claims more bytes than the frame had: a broken writer; which length
            // is wrong cannot be told, so the file is refused rather than guessed at.
            return Err(format!(
                "record {n} at byte {at}: {} captured bytes, more than the frame's {} on the wire (orig_len)",
                raw.incl_len, raw.orig_len
            ));
        }
        cap.push(raw.data.into_owned(), raw.incl_len < raw.orig_len);
        rest = next;
    }
    Ok(cap)
}

/// pcapng: packets of Ethernet interfaces; other blocks are skipped.
pub fn parse_pcapng(bytes: &[u8]) -> Result<Capture, String> {
    let (mut rest, mut parser) = PcapNgParser::new(bytes).map_err(|e| format!("pcapng: {}", format_msg(&e)))?;
    let mut cap = Capture::default();
    while !rest.is_empty() {
        let at = bytes.len() - rest.len();
        let (next, block) = parser.next_block(rest).map_err(|e| format!("pcapng block at byte {at}: {}", format_msg(&e)))?;
        let (link, data, orig_len) = match &block {
            Block::EnhancedPacket(b) => {
                let link = parser.interfaces().get(b.interface_id as usize).map(|i| i.linktype);
                (link, b.data.as_ref(), b.original_len)
            }
            // The obsolete Packet Block (libpcap and tshark still read it).
            Block::Packet(b) => {
                let link = parser.interfaces().get(b.interface_id as usize).map(|i| i.linktype);
                (link, b.data.as_ref(), b.original_len)
            }
            // A Simple Packet Block's body holds the frame and its padding to 4 bytes: its
            // bytes are min(original length, interface 0's snaplen), as libpcap takes them.
            Block::SimplePacket(b) => {
                let iface = parser.interfaces().first();
                let snaplen = iface.map_or(0, |i| i.snaplen);
                let caplen = (b.original_len as usize).min(if snaplen == 0 { usize::MAX } else { snaplen as usize });
                (iface.map(|i| i.linktype), &b.data[..caplen.min(b.data.len())], b.original_len)
            }
            _ => {
                rest = next;
                continue;
            }
        };
        if data.len() as u64 > orig_len as u64 {
            // As in classic pcap: more captured than the frame had is a broken file.
            return Err(format!(
                "pcapng block at byte {at}: {} captured bytes, more than the frame's {orig_len} (original length)",
                data.len()
            ));
        }
        match link {
            Some(DataLink::ETHERNET) => {}
            Some(other) => return Err(format!("pcapng block at byte {at}: link type {other:?} is not Ethernet")),
            None => return Err(format!("pcapng block at byte {at}: packet of an undeclared interface")),
        }
        cap.push(data.to_vec(), (data.len() as u64) < orig_len as u64);
        rest = next;
    }
    Ok(cap)
}

/// Reads every frame of a capture up front (captures for replay are small), then plays them
/// `repeat` times.
pub struct PcapIn {
    name: String,
    frames: Vec<Vec<u8>>,
    next: usize,
    rounds_left: u64,
    stats: PortStats,
    /// Frames too long to take since the datapath last asked (`take_rx_dropped`).
    too_long: u64,
    /// Per frame: its record was cut short in the capture (counted as it is played).
    cut: Vec<bool>,
}

impl PcapIn {
    pub fn open(name: &str, path: &Path, repeat: u64) -> Result<PcapIn, PcapError> {
        let cap = read_capture(path)?;
        let mut port = Self::from_frames(name, cap.frames, repeat);
        port.cut = cap.cut;
        Ok(port)
    }

    pub fn from_frames(name: &str, frames: Vec<Vec<u8>>, repeat: u64) -> PcapIn {
        PcapIn {
            name: name.to_string(),
            frames,
            next: 0,
            rounds_left: repeat.max(1),
            stats: PortStats::default(),
            too_long: 0,
            cut: Vec::new(),
        }
    }
}

impl Port for PcapIn {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, bufs: &mut BufCache, out: &mut Vec<Pkt>, max: usize) -> usize {
        // A frame too long to take still uses a slot of `max`, so a packet count stops exactly.
        let mut n = 0;
        let mut seen = 0;
        while seen < max && self.rounds_left > 0 {
            if self.next >= self.frames.len() {
                self.next = 0;
                self.rounds_left -= 1;
                if self.frames.is_empty() {
                    self.rounds_left = 0;
                }
                continue;
            }
            let f = &self.frames[self.next];
            if f.len() > MAX_CHAIN_BYTES {
                // Longer than a buffer chain holds: the driver's rx_length_errors. The
                // datapath counts it as received and dropped (`take_rx_dropped`).
                self.stats.rx_length_errors += 1;
                self.too_long += 1;
                self.next += 1;
                seen += 1;
                continue;
            }
            let Some(p) = bufs.alloc_copy(f) else {
                self.stats.rx_nobuf += 1;
                break;
            };
            self.stats.rx_truncated += u64::from(self.cut.get(self.next).copied().unwrap_or(false));
            self.next += 1;
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += p.total_len() as u64;
            out.push(p);
            n += 1;
            seen += 1;
        }
        n
    }

    fn tx_burst(&mut self, bufs: &mut BufCache, pkts: &[Pkt], more: bool) -> usize {
        self.stats.tx_bytes += pkts.iter().map(|p| p.total_len() as u64).sum::<u64>();
        bufs.free_pkts(pkts);
        self.stats.tx_packets += pkts.len() as u64;
        if !more {
            self.stats.doorbells += 1;
        }
        pkts.len()
    }

    fn rx_done(&self) -> bool {
        self.rounds_left == 0
    }

    fn rx_bounded(&self) -> bool {
        true
    }

    fn take_rx_dropped(&mut self) -> u64 {
        std::mem::take(&mut self.too_long)
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

/// Writes every transmitted frame to a capture that tshark/tcpdump read.
pub struct PcapOut {
    name: String,
    path: String,
    /// None once finished (flushed and closed).
    file: Option<OutputFile>,
    /// One tx burst's records, written with one write call; `ends[i]` is where record i ends.
    scratch: Vec<u8>,
    ends: Vec<usize>,
    stats: PortStats,
    /// The first write error, reported by `finish`.
    error: Option<std::io::Error>,
    ts: u64,
    /// Segments GRO packets "in hardware" (TSO): they are written whole, as tcpdump on a
    /// receiving veth shows them.
    pub tso: bool,
}

/// Little-endian, µs timestamps: what tcpdump writes on x86.
pub(crate) fn pcap_header() -> PcapHeader {
    PcapHeader { datalink: DataLink::ETHERNET, snaplen: MAX_SNAPLEN, endianness: pcap_file::Endianness::Little, ..Default::default() }
}

/// Appends one record in [`pcap_header`]'s byte order (synthetic timestamps 1 µs apart: a
/// capture records order, not time). Frames are whole: caplen = orig_len.
pub(crate) fn push_record<'a>(out: &mut Vec<u8>, ts_us: u64, segments: impl Iterator<Item = &'a [u8]>, len: usize) {
    let len = len as u32;
    for field in [(ts_us / 1_000_000) as u32, (ts_us % 1_000_000) as u32, len, len] {
        out.extend_from_slice(&field.to_le_bytes());
    }
    for seg in segments {
        out.extend_from_slice(seg);
    }
}

/// A capture output: opened (or created) without touching what it holds, and emptied and
/// given its header only when the run first writes to it or ends ([`OutputFile::start`]),
/// so a configuration refused after the ports were opened leaves an existing file as it
/// was, and a file created for it is removed again.
pub(crate) struct OutputFile {
    pub(crate) file: File,
    started: bool,
    /// The path of a file this run created, removed if the output never starts.
    created: Option<std::path::PathBuf>,
}

impl OutputFile {
    pub(crate) fn open(path: &Path) -> Result<OutputFile, PcapError> {
        let created = !path.exists();
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|source| PcapError::Io { path: path.display().to_string(), source })?;
        Ok(OutputFile { file, started: false, created: created.then(|| path.to_path_buf()) })
    }

    /// Empties the file and writes the pcap header, once: later calls do nothing.
    pub(crate) fn start(&mut self) -> std::io::Result<()> {
        if self.started {
            return Ok(());
        }
        self.started = true;
        self.created = None;
        self.file.set_len(0)?;
        self.file.seek(std::io::SeekFrom::Start(0))?;
        let mut header = Vec::with_capacity(24);
        pcap_header().write_to(&mut header).map_err(|e| std::io::Error::other(e.to_string()))?;
        match write_counted(&mut self.file, &header) {
            (_, Some(e)) => Err(e),
            _ => Ok(()),
        }
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if let Some(p) = self.created.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Writes `buf`, returning how many bytes reached the file before an error.
pub(crate) fn write_counted(file: &mut File, buf: &[u8]) -> (usize, Option<std::io::Error>) {
    let mut done = 0;
    while done < buf.len() {
        match file.write(&buf[done..]) {
            Ok(0) => return (done, Some(std::io::Error::from(std::io::ErrorKind::WriteZero))),
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return (done, Some(e)),
        }
    }
    (done, None)
}

impl PcapOut {
    /// Opens `path` for writing; it is emptied and written from the first transmit (or at
    /// `finish` for a run that sent nothing), not here.
    pub fn create(name: &str, path: &Path) -> Result<PcapOut, PcapError> {
        Ok(PcapOut {
            name: name.to_string(),
            path: path.display().to_string(),
            file: Some(OutputFile::open(path)?),
            scratch: Vec::with_capacity(64 * 1024),
            ends: Vec::with_capacity(256),
            stats: PortStats::default(),
            error: None,
            ts: 0,
            tso: false,
        })
    }
}

impl Port for PcapOut {
    fn name(&self) -> &str {
        &self.name
    }

    fn tso(&self) -> bool {
        self.tso
    }

    /// Its `tso` stands for every "hardware" offload: UDP fraglist packets are written whole
    /// too (what tcpdump on a receiving veth with `rx-gro-list` shows).
    fn gso_fraglist(&self) -> bool {
        self.tso
    }

    fn rx_burst(&mut self, _bufs: &mut BufCache, _out: &mut Vec<Pkt>, _max: usize) -> usize {
        0
    }

    /// Accepts the packets whose records reached the file; the rest are the caller's to drop.
    fn tx_burst(&mut self, bufs: &mut BufCache, pkts: &[Pkt], more: bool) -> usize {
        if !more {
            self.stats.doorbells += 1;
        }
        let Some(out) = self.file.as_mut().filter(|_| self.error.is_none()) else {
            return 0;
        };
        if let Err(e) = out.start() {
            self.error = Some(e);
            return 0;
        }
        let file = &mut out.file;
        self.scratch.clear();
        self.ends.clear();
        for p in pkts {
            self.ts += 1;
            push_record(&mut self.scratch, self.ts, bufs.segments(*p), p.total_len());
            self.ends.push(self.scratch.len());
        }
        let (written, err) = write_counted(file, &self.scratch);
        let accepted = self.ends.iter().take_while(|&&end| end <= written).count();
        let whole = accepted.checked_sub(1).map_or(0, |i| self.ends[i]);
        if err.is_some() && written > whole {
            // A record cut by the error: take its bytes back, so the file ends with the last
            // whole record and stays readable (error path only: two more syscalls).
            let torn = (written - whole) as u64;
            // (A device whose position reads 0, such as /dev/full, has nothing to take back.)
            if let Some(keep) = file.stream_position().ok().and_then(|end| end.checked_sub(torn)) {
                let _ = file.set_len(keep).and_then(|()| file.seek(std::io::SeekFrom::Start(keep)));
            }
        }
        self.error = err;
        for p in &pkts[..accepted] {
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += p.total_len() as u64;
            bufs.free(*p);
        }
        accepted
    }

    fn rx_done(&self) -> bool {
        true
    }

    /// End of a run: the header is written (an empty capture is a valid file) and the data
    /// synced. The file stays open: a datapath may run again (a bench's warm-up, then its
    /// measurement) and its output goes on in the same capture.
    fn finish(&mut self) -> std::io::Result<()> {
        if let Some(f) = self.file.as_mut() {
            if self.error.is_none() {
                self.error = f.start().err();
            }
            if self.error.is_none() {
                f.file.sync_data().or_else(|e| if e.raw_os_error() == Some(libc::EINVAL) { Ok(()) } else { Err(e) })?;
            }
        }
        match &self.error {
            Some(e) => Err(std::io::Error::new(e.kind(), format!("writing {}: {e}", self.path))),
            None => Ok(()),
        }
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

/// Writes frames to a pcap file (used by tests and `sluice xdp run`).
pub fn write_frames(path: &Path, frames: &[Vec<u8>]) -> Result<(), PcapError> {
    let p = path.display().to_string();
    let mut out = Vec::with_capacity(24 + frames.iter().map(|f| f.len() + 16).sum::<usize>());
    pcap_header().write_to(&mut out).map_err(|e| PcapError::Format { path: p.clone(), msg: e.to_string() })?;
    for (i, f) in frames.iter().enumerate() {
        push_record(&mut out, i as u64 + 1, std::iter::once(&f[..]), f.len());
    }
    std::fs::write(path, out).map_err(|source| PcapError::Io { path: p, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn pcap_bytes(records: &[(&[u8], u32)]) -> Vec<u8> {
        let mut out = Vec::new();
        PcapHeader { datalink: DataLink::ETHERNET, snaplen: 96, ..Default::default() }.write_to(&mut out).unwrap();
        for (i, (data, orig)) in records.iter().enumerate() {
            // Hand-built record header: the crate's writer refuses orig_len > snaplen.
            for field in [i as u32, 0, data.len() as u32, *orig] {
                out.extend_from_slice(&field.to_be_bytes());
            }
            out.extend_from_slice(data);
        }
        out
    }

    #[test]
    fn snapped_records_are_taken_and_counted() {
        let cap = parse_pcap(&pcap_bytes(&[(&[1u8; 96], 1514), (&[2u8; 60], 60)])).unwrap();
        assert_eq!(cap.frames.len(), 2);
        assert_eq!(cap.frames[0], vec![1u8; 96]);
        assert_eq!(cap.truncated, 1);
    }

    /// A record holding more bytes than its frame had is refused with the record named.
    #[test]
    fn a_record_longer_than_its_frame_refuses_the_file() {
        let e = parse_pcap(&pcap_bytes(&[(&[1u8; 60], 60), (&[2u8; 64], 60)])).unwrap_err();
        assert!(e.contains("record 1 at byte 100") && e.contains("64 captured bytes") && e.contains("60"), "{e}");
    }

    /// Packets sent back into a replayed capture count in bytes as well as packets.
    #[test]
    fn pcap_in_counts_what_it_is_sent_in_bytes() {
        let pool = crate::buf::Pool::new(8).unwrap();
        let mut bufs = pool.cache();
        let mut port = PcapIn::from_frames("in", Vec::new(), 1);
        let pkts: Vec<Pkt> = [60usize, 100].iter().map(|&n| bufs.alloc_copy(&vec![0u8; n]).unwrap()).collect();
        assert_eq!(port.tx_burst(&mut bufs, &pkts, false), 2);
        assert_eq!((port.stats().tx_packets, port.stats().tx_bytes), (2, 160));
        assert_eq!(bufs.in_use(), 0);
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        let e = parse_pcap(&[0u8; 10]).unwrap_err();
        assert!(e.contains("too short"), "{e}");
        let e = parse_pcap(&[0u8; 24]).unwrap_err();
        assert!(e.contains("not a pcap"), "{e}");
        let mut b = pcap_bytes(&[(&[1u8; 60], 60)]);
        b.truncate(b.len() - 10);
        let e = parse_pcap(&b).unwrap_err();
        assert!(e.contains("record 0 at byte 24") && e.contains("ends inside"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let e = read_capture(dir.path()).unwrap_err().to_string();
        assert!(e.contains("directory"), "{e}");
        let empty = dir.path().join("empty.pcap");
        std::fs::write(&empty, b"").unwrap();
        let e = read_capture(&empty).unwrap_err().to_string();
        assert!(e.contains("empty file"), "{e}");
    }

    #[test]
    fn pcapng_is_read() {
        use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
        use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
        use pcap_file::pcapng::PcapNgWriter;
        let mut w = PcapNgWriter::new(Vec::new()).unwrap();
        w.write_pcapng_block(InterfaceDescriptionBlock::new(DataLink::ETHERNET, 128)).unwrap();
        for (len, orig) in [(60usize, 60u32), (128, 1514)] {
            let data = vec![7u8; len];
            let epb = EnhancedPacketBlock {
                interface_id: 0,
                timestamp: Duration::from_micros(1),
                original_len: orig,
                data: std::borrow::Cow::Owned(data),
                options: vec![],
            };
            w.write_pcapng_block(epb).unwrap();
        }
        let bytes = w.into_inner();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.pcapng");
        std::fs::write(&path, bytes).unwrap();
        let cap = read_capture(&path).unwrap();
        assert_eq!(cap.frames.len(), 2);
        assert_eq!(cap.frames[1].len(), 128);
        assert_eq!(cap.truncated, 1);
    }

    /// Cut records are counted as they are played: a run stopped after one round of a
    /// capture repeated ten times counts them once (they had been counted for every round
    /// up front).
    #[test]
    fn cut_records_are_counted_as_they_are_played() {
        let pool = crate::buf::Pool::new(64).unwrap();
        let mut bufs = pool.cache();
        let mut port = PcapIn::from_frames("in", vec![vec![1u8; 60], vec![2u8; 60], vec![3u8; 60]], 10);
        port.cut = vec![false, true, false];
        let mut out = Vec::new();
        assert_eq!(port.rx_burst(&mut bufs, &mut out, 2), 2);
        assert_eq!(port.stats().rx_truncated, 1);
        assert_eq!(port.rx_burst(&mut bufs, &mut out, 2), 2, "the rest of round 1, then round 2 begins");
        assert_eq!(port.stats().rx_truncated, 1, "frame 1 of round 2 not played yet");
        assert_eq!(port.rx_burst(&mut bufs, &mut out, 1), 1);
        assert_eq!(port.stats().rx_truncated, 2);
        bufs.free_pkts(&out);
    }

    /// A Simple Packet Block's frame is min(original length, snaplen) bytes of its body,
    /// without the padding to 4 bytes (libpcap); the obsolete Packet Block is read too.
    #[test]
    fn pcapng_simple_and_obsolete_packet_blocks_are_read_as_libpcap_reads_them() {
        use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
        use pcap_file::pcapng::blocks::packet::PacketBlock;
        use pcap_file::pcapng::blocks::simple_packet::SimplePacketBlock;
        use pcap_file::pcapng::PcapNgWriter;
        let mut w = PcapNgWriter::new(Vec::new()).unwrap();
        w.write_pcapng_block(InterfaceDescriptionBlock::new(DataLink::ETHERNET, 100)).unwrap();
        // 61 bytes (written with 3 bytes of padding), and 150 bytes cut to the snaplen of 100.
        w.write_pcapng_block(SimplePacketBlock { original_len: 61, data: std::borrow::Cow::Owned(vec![5u8; 61]) }).unwrap();
        w.write_pcapng_block(SimplePacketBlock { original_len: 150, data: std::borrow::Cow::Owned(vec![6u8; 100]) }).unwrap();
        let pb = PacketBlock {
            interface_id: 0,
            drop_count: 0,
            timestamp: 1,
            captured_len: 62,
            original_len: 62,
            data: std::borrow::Cow::Owned(vec![8u8; 62]),
            options: vec![],
        };
        w.write_pcapng_block(pb).unwrap();
        let cap = parse_pcapng(&w.into_inner()).unwrap();
        let lens: Vec<usize> = cap.frames.iter().map(Vec::len).collect();
        assert_eq!(lens, [61, 100, 62]);
        assert_eq!(cap.frames[0], vec![5u8; 61], "no padding bytes");
        assert_eq!(cap.truncated, 1, "the 150-byte frame, cut to 100");
    }

    /// A write cut short by a full disk leaves no torn record: the file ends with the last
    /// whole one. Run in a child process (this test binary again) whose file size limit
    /// (RLIMIT_FSIZE, SIGXFSZ ignored: EFBIG) leaves room for a record and a half.
    #[test]
    fn a_record_cut_by_a_write_error_is_taken_back() {
        const CHILD: &str = "SLUICE_PCAP_FSIZE_CHILD";
        if let Ok(path) = std::env::var(CHILD) {
            let pool = crate::buf::Pool::new(8).unwrap();
            let mut bufs = pool.cache();
            let mut out = PcapOut::create("out", Path::new(&path)).unwrap();
            let pkts: Vec<Pkt> = (0..2u8).map(|i| bufs.alloc_copy(&[i; 60]).unwrap()).collect();
            assert_eq!(out.tx_burst(&mut bufs, &pkts, false), 1, "room for one record and a half");
            bufs.free_pkts(&pkts[1..]);
            assert!(out.finish().is_err());
            return;
        }
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.pcap");
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "port::pcap::tests::a_record_cut_by_a_write_error_is_taken_back", "--test-threads=1"]);
        cmd.env(CHILD, &path);
        // Header 24 + one record of 16 + 60, and 38 bytes of the next.
        let limit = 24 + 76 + 38;
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit { rlim_cur: limit, rlim_max: limit };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 || libc::signal(libc::SIGXFSZ, libc::SIG_IGN) == libc::SIG_ERR {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.output().unwrap();
        assert!(child.status.success(), "{}", String::from_utf8_lossy(&child.stdout));
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 24 + 16 + 60, "the cut record is gone");
        assert_eq!(parse_pcap(&bytes).unwrap().frames, vec![vec![0u8; 60]]);
    }

    /// `finish` ends a run, not the port: what a second run sends is written after the
    /// first run's records (it was refused before, every packet a tx_error).
    #[test]
    fn a_capture_takes_the_output_of_every_run() {
        let pool = crate::buf::Pool::new(8).unwrap();
        let mut bufs = pool.cache();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.pcap");
        let mut out = PcapOut::create("out", &path).unwrap();
        for run in 0..2u8 {
            let p = bufs.alloc_copy(&[run; 60]).unwrap();
            assert_eq!(out.tx_burst(&mut bufs, &[p], false), 1, "run {run}");
            out.finish().unwrap();
        }
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(parse_pcap(&bytes).unwrap().frames, vec![vec![0u8; 60], vec![1u8; 60]]);
    }

    #[test]
    fn write_errors_refuse_the_packets() {
        let pool = crate::buf::Pool::new(64).unwrap();
        let mut bufs = pool.cache();
        let Ok(mut out) = PcapOut::create("out", Path::new("/dev/full")) else {
            // The header alone already failed: also an error, as it should be.
            return;
        };
        let pkts: Vec<Pkt> = (0..8).map(|_| bufs.alloc_copy(&[0u8; 60]).unwrap()).collect();
        let accepted = out.tx_burst(&mut bufs, &pkts, false);
        assert_eq!(accepted, 0, "/dev/full accepted frames");
        assert_eq!(out.stats().tx_packets, 0);
        assert!(out.finish().is_err());
        bufs.free_pkts(&pkts);
        assert_eq!(bufs.in_use(), 0);
    }
}
