//! pcap files: replay a capture as a receive port, record transmitted frames as a capture.

use super::{Port, PortStats};
use crate::buf::{BufCache, Pkt, MAX_DATA};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::DataLink;
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    #[error("pcap {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("pcap {path}: {msg}")]
    Format { path: String, msg: String },
}

/// Reads every frame of a capture up front (captures for replay are small), then plays them
/// `repeat` times.
pub struct PcapIn {
    name: String,
    frames: Vec<Vec<u8>>,
    next: usize,
    rounds_left: u64,
    stats: PortStats,
    /// Frames longer than a buffer holds: counted and skipped.
    pub oversize: u64,
}

/// Loads all frames of a pcap file (Ethernet link type).
pub fn read_frames(path: &Path) -> Result<Vec<Vec<u8>>, PcapError> {
    let p = path.display().to_string();
    let file = File::open(path).map_err(|source| PcapError::Io { path: p.clone(), source })?;
    let mut reader = PcapReader::new(file).map_err(|e| PcapError::Format { path: p.clone(), msg: e.to_string() })?;
    if reader.header().datalink != DataLink::ETHERNET {
        return Err(PcapError::Format { path: p, msg: format!("link type {:?} is not Ethernet", reader.header().datalink) });
    }
    let mut frames = Vec::new();
    while let Some(pkt) = reader.next_packet() {
        let pkt = pkt.map_err(|e| PcapError::Format { path: p.clone(), msg: e.to_string() })?;
        frames.push(pkt.data.into_owned());
    }
    Ok(frames)
}

impl PcapIn {
    pub fn open(name: &str, path: &Path, repeat: u64) -> Result<PcapIn, PcapError> {
        Ok(Self::from_frames(name, read_frames(path)?, repeat))
    }

    pub fn from_frames(name: &str, frames: Vec<Vec<u8>>, repeat: u64) -> PcapIn {
        PcapIn { name: name.to_string(), frames, next: 0, rounds_left: repeat.max(1), stats: PortStats::default(), oversize: 0 }
    }
}

impl Port for PcapIn {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, bufs: &mut BufCache, out: &mut Vec<Pkt>, max: usize) -> usize {
        let mut n = 0;
        while n < max && self.rounds_left > 0 {
            if self.next >= self.frames.len() {
                self.next = 0;
                self.rounds_left -= 1;
                if self.frames.is_empty() {
                    self.rounds_left = 0;
                }
                continue;
            }
            let f = &self.frames[self.next];
            if f.len() > MAX_DATA {
                self.oversize += 1;
                self.next += 1;
                continue;
            }
            let Some(p) = bufs.alloc_copy(f) else {
                self.stats.rx_nobuf += 1;
                break;
            };
            self.next += 1;
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += p.len as u64;
            out.push(p);
            n += 1;
        }
        n
    }

    fn tx_burst(&mut self, bufs: &mut BufCache, pkts: &[Pkt], more: bool) -> usize {
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

    fn stats(&self) -> PortStats {
        self.stats
    }
}

/// Writes every transmitted frame to a capture that tshark/tcpdump read.
pub struct PcapOut {
    name: String,
    /// None once finished (the writer is flushed and closed).
    writer: Option<PcapWriter<BufWriter<File>>>,
    stats: PortStats,
    errors: u64,
    ts: u64,
}

impl PcapOut {
    pub fn create(name: &str, path: &Path) -> Result<PcapOut, PcapError> {
        let p = path.display().to_string();
        let file = File::create(path).map_err(|source| PcapError::Io { path: p.clone(), source })?;
        let header = PcapHeader { datalink: DataLink::ETHERNET, snaplen: 65535, ..Default::default() };
        let writer =
            PcapWriter::with_header(BufWriter::new(file), header).map_err(|e| PcapError::Format { path: p, msg: e.to_string() })?;
        Ok(PcapOut { name: name.to_string(), writer: Some(writer), stats: PortStats::default(), errors: 0, ts: 0 })
    }
}

impl Port for PcapOut {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, _bufs: &mut BufCache, _out: &mut Vec<Pkt>, _max: usize) -> usize {
        0
    }

    fn tx_burst(&mut self, bufs: &mut BufCache, pkts: &[Pkt], more: bool) -> usize {
        for p in pkts {
            let data = bufs.data(*p);
            // Timestamps are synthetic (1 µs apart): the capture records order, not time.
            self.ts += 1;
            let pkt = PcapPacket::new(Duration::from_micros(self.ts), data.len() as u32, data);
            let ok = self.writer.as_mut().is_some_and(|w| w.write_packet(&pkt).is_ok());
            if !ok {
                self.errors += 1;
            }
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += p.len as u64;
            bufs.free(p.buf);
        }
        if !more {
            self.stats.doorbells += 1;
        }
        pkts.len()
    }

    fn rx_done(&self) -> bool {
        true
    }

    fn finish(&mut self) -> std::io::Result<()> {
        use std::io::Write;
        if let Some(w) = self.writer.take() {
            w.into_writer().flush()?;
        }
        if self.errors > 0 {
            return Err(std::io::Error::other(format!("{} frames could not be written", self.errors)));
        }
        Ok(())
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

/// Writes frames to a pcap file (used by tests and `sluice xdp run`).
pub fn write_frames(path: &Path, frames: &[Vec<u8>]) -> Result<(), PcapError> {
    let p = path.display().to_string();
    let file = File::create(path).map_err(|source| PcapError::Io { path: p.clone(), source })?;
    let header = PcapHeader { datalink: DataLink::ETHERNET, snaplen: 65535, ..Default::default() };
    let mut w =
        PcapWriter::with_header(BufWriter::new(file), header).map_err(|e| PcapError::Format { path: p.clone(), msg: e.to_string() })?;
    for (i, f) in frames.iter().enumerate() {
        let pkt = PcapPacket::new(Duration::from_micros(i as u64 + 1), f.len() as u32, f);
        w.write_packet(&pkt).map_err(|e| PcapError::Format { path: p.clone(), msg: e.to_string() })?;
    }
    Ok(())
}
