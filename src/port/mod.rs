//! Ports: where packets enter and leave. One trait; the in-memory generator and sinks are
//! the default lab, pcap files replay and record captures.
//!
//! Transmit follows the kernel's `xmit_more`: `tx_burst(.., more = true)` queues without
//! notifying the "hardware"; the doorbell rings only on a burst with `more = false`.

pub mod afpacket;
pub mod afxdp;
pub mod fault;
pub mod gen;
pub mod pcap;
pub mod rss;
pub mod sim;
pub mod sink;
pub mod tap;

use crate::buf::{BufCache, Pkt};
use serde::Serialize;

/// Per-port counters.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct PortStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub doorbells: u64,
    /// Packets the port could not produce because the pool was empty.
    pub rx_nobuf: u64,
    /// `check` sink: packets that failed validation.
    pub check_failures: u64,
    /// Frames longer than a receive buffer holds (the driver's rx_length_errors): received
    /// and dropped, never cut.
    pub rx_length_errors: u64,
    /// Capture records holding fewer bytes than the frame had on the wire (taken as captured).
    pub rx_truncated: u64,
    /// Frames lost because the receive ring was full when they arrived (a NIC's
    /// rx_missed_errors): they never entered the datapath.
    pub rx_missed: u64,
}

impl PortStats {
    /// Adds another queue's counters (a port's figures are the sum over its queues).
    pub fn merge(&mut self, o: &PortStats) {
        let PortStats {
            rx_packets,
            rx_bytes,
            tx_packets,
            tx_bytes,
            doorbells,
            rx_nobuf,
            check_failures,
            rx_length_errors,
            rx_truncated,
            rx_missed,
        } = *o;
        self.rx_packets += rx_packets;
        self.rx_bytes += rx_bytes;
        self.tx_packets += tx_packets;
        self.tx_bytes += tx_bytes;
        self.doorbells += doorbells;
        self.rx_nobuf += rx_nobuf;
        self.check_failures += check_failures;
        self.rx_length_errors += rx_length_errors;
        self.rx_truncated += rx_truncated;
        self.rx_missed += rx_missed;
    }
}

pub trait Port: Send {
    fn name(&self) -> &str;

    /// Receives up to `max` packets, appending them to `out`. Returns how many.
    fn rx_burst(&mut self, bufs: &mut BufCache, out: &mut Vec<Pkt>, max: usize) -> usize;

    /// Queues `pkts` for transmission; the port owns the accepted ones (it frees them on
    /// completion). Returns how many it accepted: for a port with a `tx_queue` the qdisc
    /// requeues the rest; for others the caller drops them (`tx_error`; `XdpRedirectFailed`
    /// on the XDP path). `more` says more
    /// packets follow at once, so the doorbell may wait.
    fn tx_burst(&mut self, bufs: &mut BufCache, pkts: &[Pkt], more: bool) -> usize;

    /// A port with a transmit ring that can fill (`sim`, `afpacket`, `afxdp`): its transmit queue's
    /// BQL and stop state. The qdisc sizes bulks by it, holds packets while it is stopped
    /// and requeues what the port refuses. None: the port takes every packet at once (what
    /// it refuses is an error).
    fn tx_queue(&self) -> Option<&crate::tx::bql::TxqState> {
        None
    }

    /// Reaps transmit completions, returning their buffers. Returns how many.
    fn tx_completions(&mut self, _bufs: &mut BufCache) -> usize {
        0
    }

    /// Frames the port took wait for a doorbell to go (a kernel ring that had no room for
    /// them): the transmit softirq calls `tx_completions` each round until none do, even
    /// when nothing else is sent.
    fn tx_waiting(&self) -> bool {
        false
    }

    /// True when the port will never receive again (a pcap file fully read, a packet
    /// count reached).
    fn rx_done(&self) -> bool {
        false
    }

    /// At shutdown, before `finish`: gives up every packet the port still holds (a fault
    /// port's delayed frames), so no buffer stays out of the pool. Returns how many.
    fn flush_held(&mut self, _bufs: &mut BufCache) -> usize {
        0
    }

    /// True when the port's input ends by itself (a capture, a generator with a packet
    /// count): a run without a time limit ends when every such input is done.
    fn rx_bounded(&self) -> bool {
        false
    }

    /// Frames the port saw since the last call but could not take (longer than a buffer
    /// holds): the datapath counts them as received and dropped (`rx_length_error`).
    fn take_rx_dropped(&mut self) -> u64 {
        0
    }

    /// Packets the port accepted since the last call whose transmission then failed (a
    /// kernel ring refused them at the doorbell), and their bytes: the transmit path moves
    /// them from transmitted to dropped (`tx_error`), so a failed send never counts as sent.
    fn take_tx_failed(&mut self) -> (u64, u64) {
        (0, 0)
    }

    /// The port verified the TCP/UDP checksums of what it delivers (rx checksum offload:
    /// `CHECKSUM_UNNECESSARY`), so GRO need not sum the payloads again.
    fn rx_csum_verified(&self) -> bool {
        false
    }

    /// The port segments TCP GSO packets itself (TSO): TCP GRO packets go to it whole. Ports
    /// without it (the default: sinks, the pcap writer) get them split by GSO first.
    fn tso(&self) -> bool {
        false
    }

    /// The port takes UDP fraglist packets whole (`NETIF_F_GSO_FRAGLIST`; a NIC's TSO does not
    /// cover them): only a pcap writer told it segments in "hardware". Others get them split.
    fn gso_fraglist(&self) -> bool {
        false
    }

    /// A descriptor that becomes readable when the port has frames to receive (a packet or
    /// XDP socket): an idle worker sleeps in poll() on it, as NAPI re-enables the interrupt,
    /// instead of spinning. None: the port is polled only (in-memory ports).
    fn rx_wait_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }

    /// poll() found an error on `rx_wait_fd` (POLLERR): the port reads and clears it, or
    /// every later poll() would return at once and the idle worker would spin.
    fn rx_wait_error(&mut self) {}

    /// Flushes buffered output (pcap writer).
    fn finish(&mut self) -> std::io::Result<()> {
        Ok(())
    }

    fn stats(&self) -> PortStats;

    /// Failures recorded by a validating port, with a short description of the first few.
    fn check_report(&self) -> Vec<String> {
        Vec::new()
    }

    /// Faults injected, for a fault-injection port (`fault::FaultPort`).
    fn fault_stats(&self) -> Option<fault::FaultStats> {
        None
    }

    /// Received-side captures for tests: a copy of every transmitted frame, if the port
    /// keeps them (`sink::Capture`).
    fn captured(&self) -> Option<&[Vec<u8>]> {
        None
    }

    /// A closed-loop generator's transactions and latencies (`gen.request_response`).
    fn request_response(&self) -> Option<gen::RequestResponse> {
        None
    }
}

/// Parses "aa:bb:cc:dd:ee:ff".
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in mac.iter_mut() {
        let part = parts.next()?;
        if part.is_empty() || part.len() > 2 || !part.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        *b = u8::from_str_radix(part, 16).ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(mac)
}

pub fn fmt_mac(m: &[u8; 6]) -> String {
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_round_trip() {
        let m = parse_mac("02:00:0a:ff:00:01").unwrap();
        assert_eq!(m, [2, 0, 10, 255, 0, 1]);
        assert_eq!(fmt_mac(&m), "02:00:0a:ff:00:01");
        assert!(parse_mac("02:00").is_none());
        assert!(parse_mac("02:00:0a:ff:00:01:07").is_none());
        assert!(parse_mac("zz:00:0a:ff:00:01").is_none());
        assert!(parse_mac("02:00:0a:ff:00:001").is_none(), "7 hex digits");
        assert!(parse_mac("02:00:0a:ff:00:+1").is_none());
        assert!(parse_mac("02:00:0a:ff::01").is_none());
    }
}
