//! GRO's counters (the `gro` stage's, kept here so that `stats` depends on no stage).

use serde::Serialize;

/// Why a held packet was completed (delivered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[repr(u8)]
pub enum FlushCause {
    /// PSH, FIN, URG, RST or SYN merged: the segment ends the train (tcp_gro_receive's
    /// out_check_final).
    Flags,
    /// A short segment merged: less than the MSS ends the train.
    Short,
    /// The next segment did not continue it (seq, ack, window, flags, options, IP ID,
    /// TTL/TOS/DF, longer than the MSS, empty).
    Mismatch,
    /// `gro_max_size` bytes (64 KB for a UDP fraglist), `gro::MAX_GRO_SEGS` segments or
    /// `UDP_GRO_CNT_MAX` datagrams reached.
    Full,
    /// A ninth flow was held in its bucket (gro_flush_oldest).
    Evicted,
    /// Held over a tick at the end of a poll that used its whole budget.
    Aged,
    /// The poll completed (napi_complete_done), or the run drained.
    PollDone,
}

impl FlushCause {
    pub const COUNT: usize = 7;
}

/// GRO and normal-list counters of one worker.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct GroStats {
    /// Segments whose payload joined another packet (each ends there: the ledger's
    /// "rx merged").
    pub merged: u64,
    /// Packets held as the head of a flow.
    pub held: u64,
    /// Packets GRO passed as they are.
    pub normal: u64,
    /// Held packets completed, by [`FlushCause`].
    pub flushed: [u64; FlushCause::COUNT],
    /// Segments per completed packet: bucket i counts packets of [2^i, 2^(i+1)) segments.
    pub segs_log2: [u64; 7],
    /// Normal-list deliveries (gro_normal_list calls with something on the list) and the
    /// segments they carried.
    pub lists: u64,
    pub list_segs: u64,
    /// GSO on transmit: packets split, and the segments made.
    pub gso_packets: u64,
    pub gso_segs: u64,
}

impl GroStats {
    pub fn merge(&mut self, o: &GroStats) {
        self.merged += o.merged;
        self.held += o.held;
        self.normal += o.normal;
        for (a, b) in self.flushed.iter_mut().zip(o.flushed.iter()) {
            *a += b;
        }
        for (a, b) in self.segs_log2.iter_mut().zip(o.segs_log2.iter()) {
            *a += b;
        }
        self.lists += o.lists;
        self.list_segs += o.list_segs;
        self.gso_packets += o.gso_packets;
        self.gso_segs += o.gso_segs;
    }

    pub(crate) fn record_segs(&mut self, segs: u16) {
        let b = (u16::BITS - 1 - segs.max(1).leading_zeros()) as usize;
        self.segs_log2[b.min(6)] += 1;
    }
}
