//! A tap: wraps any port and writes a pcap of every frame it received and transmitted
//! (`--capture PORT=FILE`, `capture = "FILE"` on a port), as tcpdump on an interface would.
//!
//! All queues of a port write to one file: each queue builds a burst's records in its own
//! buffer and appends them with one write under a lock (once per burst, never per packet).
//! Received frames are recorded as the wrapped port hands them over, transmitted frames as
//! the wrapped port accepts them. Timestamps are wall-clock time, one per burst.

use super::pcap::{push_record, write_counted, OutputFile, PcapError};
use super::{Port, PortStats};
use crate::buf::{BufCache, Pkt};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The capture file, shared by a port's queues.
struct TapFile {
    path: String,
    out: OutputFile,
    /// The first write error: later bursts are not written, `finish` reports it.
    error: Option<std::io::Error>,
    frames: u64,
}

pub struct Tap {
    inner: Box<dyn Port>,
    out: Arc<Mutex<TapFile>>,
    scratch: Vec<u8>,
    ends: Vec<usize>,
}

/// Wraps each queue of a port in a tap writing to `path` (created, or emptied when the run
/// first writes to it: a configuration refused later leaves an existing file alone).
pub fn wrap_queues(queues: Vec<Box<dyn Port>>, path: &Path) -> Result<Vec<Box<dyn Port>>, PcapError> {
    let file = OutputFile::open(path)?;
    let out = Arc::new(Mutex::new(TapFile { path: path.display().to_string(), out: file, error: None, frames: 0 }));
    Ok(queues
        .into_iter()
        .map(|inner| {
            Box::new(Tap { inner, out: out.clone(), scratch: Vec::with_capacity(64 * 1024), ends: Vec::with_capacity(256) })
                as Box<dyn Port>
        })
        .collect())
}

fn now_us() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

impl Tap {
    /// Appends the records of `pkts` to the burst buffer.
    fn record(&mut self, bufs: &BufCache, pkts: &[Pkt]) {
        let ts = now_us();
        for p in pkts {
            push_record(&mut self.scratch, ts, bufs.segments(*p), p.total_len());
            self.ends.push(self.scratch.len());
        }
    }

    /// Writes the first `n` buffered records and clears the buffer.
    fn write(&mut self, n: usize) {
        let upto = if n == 0 { 0 } else { self.ends[n - 1] };
        if upto > 0 {
            if let Ok(mut f) = self.out.lock() {
                if f.error.is_none() {
                    f.error = f.out.start().err();
                }
                if f.error.is_none() {
                    let (_, err) = write_counted(&mut f.out.file, &self.scratch[..upto]);
                    f.error = err;
                    f.frames += n as u64;
                }
            }
        }
        self.scratch.clear();
        self.ends.clear();
    }

    /// Frames written to the capture so far, by all queues of the port.
    pub fn frames_written(&self) -> u64 {
        self.out.lock().map_or(0, |f| f.frames)
    }
}

impl Port for Tap {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn rx_burst(&mut self, bufs: &mut BufCache, out: &mut Vec<Pkt>, max: usize) -> usize {
        let start = out.len();
        let n = self.inner.rx_burst(bufs, out, max);
        if n > 0 {
            let got = &out[start..];
            self.record(bufs, got);
            self.write(got.len());
        }
        n
    }

    fn tx_burst(&mut self, bufs: &mut BufCache, pkts: &[Pkt], more: bool) -> usize {
        // Recorded before the port frees the buffers; written for the ones it accepted.
        self.record(bufs, pkts);
        let accepted = self.inner.tx_burst(bufs, pkts, more).min(pkts.len());
        self.write(accepted);
        accepted
    }

    fn tx_queue(&self) -> Option<&crate::tx::bql::TxqState> {
        self.inner.tx_queue()
    }

    fn tx_waiting(&self) -> bool {
        self.inner.tx_waiting()
    }

    fn tx_completions(&mut self, bufs: &mut BufCache) -> usize {
        self.inner.tx_completions(bufs)
    }

    fn rx_done(&self) -> bool {
        self.inner.rx_done()
    }

    fn flush_held(&mut self, bufs: &mut BufCache) -> usize {
        self.inner.flush_held(bufs)
    }

    fn rx_bounded(&self) -> bool {
        self.inner.rx_bounded()
    }

    fn take_rx_dropped(&mut self) -> u64 {
        self.inner.take_rx_dropped()
    }

    fn take_tx_failed(&mut self) -> (u64, u64) {
        self.inner.take_tx_failed()
    }

    fn rx_csum_verified(&self) -> bool {
        self.inner.rx_csum_verified()
    }

    fn tso(&self) -> bool {
        self.inner.tso()
    }

    fn gso_fraglist(&self) -> bool {
        self.inner.gso_fraglist()
    }

    fn finish(&mut self) -> std::io::Result<()> {
        let inner = self.inner.finish();
        if let Ok(mut f) = self.out.lock() {
            if f.error.is_none() {
                // Nothing captured is still an empty capture, as tcpdump -w leaves.
                f.error = f.out.start().err();
            }
            if let Some(e) = &f.error {
                return Err(std::io::Error::new(e.kind(), format!("capture {}: {e}", f.path)));
            }
        }
        inner
    }

    fn stats(&self) -> PortStats {
        self.inner.stats()
    }

    fn check_report(&self) -> Vec<String> {
        self.inner.check_report()
    }

    fn fault_stats(&self) -> Option<super::fault::FaultStats> {
        self.inner.fault_stats()
    }

    fn captured(&self) -> Option<&[Vec<u8>]> {
        self.inner.captured()
    }

    fn rx_wait_fd(&self) -> Option<std::os::fd::RawFd> {
        self.inner.rx_wait_fd()
    }

    fn rx_wait_error(&mut self) {
        self.inner.rx_wait_error()
    }

    fn request_response(&self) -> Option<super::gen::RequestResponse> {
        self.inner.request_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port that only answers the questions a wrapper must pass on.
    struct Probe;

    impl Port for Probe {
        fn name(&self) -> &str {
            "probe"
        }
        fn rx_burst(&mut self, _: &mut BufCache, _: &mut Vec<Pkt>, _: usize) -> usize {
            0
        }
        fn tx_burst(&mut self, _: &mut BufCache, _: &[Pkt], _: bool) -> usize {
            0
        }
        fn stats(&self) -> PortStats {
            PortStats::default()
        }
        fn rx_wait_fd(&self) -> Option<std::os::fd::RawFd> {
            Some(7)
        }
        fn tso(&self) -> bool {
            true
        }
        fn rx_bounded(&self) -> bool {
            true
        }
    }

    /// A capture on a port changes nothing about the port: an AF_PACKET / AF_XDP port's
    /// descriptor still lets an idle worker sleep in poll() (it had spun a core), and its
    /// offloads and bounds stay what they are.
    #[test]
    fn a_tap_passes_on_what_the_port_says_about_itself() {
        let dir = tempfile::tempdir().unwrap();
        let tapped = wrap_queues(vec![Box::new(Probe)], &dir.path().join("t.pcap")).unwrap();
        assert_eq!(tapped[0].rx_wait_fd(), Some(7));
        assert!(tapped[0].tso() && tapped[0].rx_bounded());
        assert!(tapped[0].request_response().is_none());
    }
}
