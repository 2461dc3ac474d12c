//! TCP header (RFC 9293) and options (MSS, window scale RFC 7323, SACK RFC 2018,
//! timestamps RFC 7323).
//!
//! The view covers one whole segment (the IP payload): the checksum length is the view's
//! buffer length. Getters need `len >= MIN_HEADER_LEN`; `options`, `payload` and the
//! checksum functions then clamp to the buffer whatever the data offset says.

use super::checksum;
use super::{read_u16, read_u32, write_u16, write_u32, Result, WireError, IPPROTO_TCP};

pub const MIN_HEADER_LEN: usize = 20;
/// Data offset is 4 bits of 32-bit words.
pub const MAX_HEADER_LEN: usize = 60;

const SRC_PORT: usize = 0;
const DST_PORT: usize = 2;
const SEQ: usize = 4;
const ACK: usize = 8;
const DATA_OFFSET: usize = 12;
const FLAGS: usize = 13;
const WINDOW: usize = 14;
const CHECKSUM: usize = 16;
const URGENT: usize = 18;

/// Control bits of byte 13.
pub mod flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;
}

/// Option kinds (IANA "TCP Option Kind Numbers").
pub mod option_kind {
    pub const END_OF_LIST: u8 = 0;
    pub const NOP: u8 = 1;
    pub const MSS: u8 = 2;
    pub const WINDOW_SCALE: u8 = 3;
    pub const SACK_PERMITTED: u8 = 4;
    pub const SACK: u8 = 5;
    pub const TIMESTAMP: u8 = 8;
}

/// View of a TCP segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// len >= 20 (Truncated), data offset >= 5 (Malformed), header_len <= len (Truncated).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < MIN_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let header_len = self.header_len();
        if header_len < MIN_HEADER_LEN {
            return Err(WireError::Malformed);
        }
        if header_len > len {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    pub fn src_port(&self) -> u16 {
        read_u16(self.bytes(), SRC_PORT)
    }

    pub fn dst_port(&self) -> u16 {
        read_u16(self.bytes(), DST_PORT)
    }

    pub fn seq(&self) -> u32 {
        read_u32(self.bytes(), SEQ)
    }

    pub fn ack(&self) -> u32 {
        read_u32(self.bytes(), ACK)
    }

    /// Header length in bytes (data offset * 4), as declared.
    pub fn header_len(&self) -> usize {
        usize::from(self.bytes()[DATA_OFFSET] >> 4) * 4
    }

    /// The eight control bits (see [`flags`]).
    pub fn flags(&self) -> u8 {
        self.bytes()[FLAGS]
    }

    pub fn window(&self) -> u16 {
        read_u16(self.bytes(), WINDOW)
    }

    pub fn checksum(&self) -> u16 {
        read_u16(self.bytes(), CHECKSUM)
    }

    pub fn urgent(&self) -> u16 {
        read_u16(self.bytes(), URGENT)
    }

    /// End of the option bytes: declared header length clamped into [20, len].
    fn header_end(&self) -> usize {
        self.header_len().max(MIN_HEADER_LEN).min(self.bytes().len())
    }

    /// Bytes 20..header_len, clamped to the buffer.
    pub fn options(&self) -> &[u8] {
        self.bytes().get(MIN_HEADER_LEN..self.header_end()).unwrap_or(&[])
    }

    /// Parses [`TcpPacket::options`].
    pub fn options_iter(&self) -> TcpOptions<'_> {
        TcpOptions::new(self.options())
    }

    fn payload_range(&self) -> core::ops::Range<usize> {
        let len = self.bytes().len();
        self.header_len().max(MIN_HEADER_LEN).min(len)..len
    }

    /// Bytes after the declared header (never inside the fixed header), clamped.
    pub fn payload(&self) -> &[u8] {
        &self.bytes()[self.payload_range()]
    }

    /// Upper-layer length for the pseudo-header. A segment cannot exceed 64 KiB over
    /// IPv4 (nor 4 GiB over IPv6); saturating keeps oversized views defined (they fail).
    fn l4_len_u32(&self) -> u32 {
        u32::try_from(self.bytes().len()).unwrap_or(u32::MAX)
    }

    pub fn verify_checksum_v4(&self, src: &[u8; 4], dst: &[u8; 4]) -> bool {
        let Ok(len) = u16::try_from(self.bytes().len()) else {
            return false;
        };
        checksum::verifies(checksum::pseudo_header_v4(src, dst, IPPROTO_TCP, len) + checksum::sum_be16(self.bytes()))
    }

    pub fn verify_checksum_v6(&self, src: &[u8; 16], dst: &[u8; 16]) -> bool {
        checksum::verifies(checksum::pseudo_header_v6(src, dst, IPPROTO_TCP, self.l4_len_u32()) + checksum::sum_be16(self.bytes()))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> TcpPacket<&'a T> {
    /// [`TcpPacket::payload`] with the lifetime of the underlying buffer rather than of the
    /// view, so a parser can return it after the view goes out of scope.
    pub fn into_payload(self) -> &'a [u8] {
        let range = self.payload_range();
        let buffer: &'a T = self.buffer;
        &buffer.as_ref()[range]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    fn bytes_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    pub fn set_src_port(&mut self, port: u16) {
        write_u16(self.bytes_mut(), SRC_PORT, port);
    }

    pub fn set_dst_port(&mut self, port: u16) {
        write_u16(self.bytes_mut(), DST_PORT, port);
    }

    pub fn set_seq(&mut self, seq: u32) {
        write_u32(self.bytes_mut(), SEQ, seq);
    }

    pub fn set_ack(&mut self, ack: u32) {
        write_u32(self.bytes_mut(), ACK, ack);
    }

    /// Header length in bytes, rounded down to 4-byte units and capped at 60; the
    /// reserved low nibble of the byte is kept.
    pub fn set_header_len(&mut self, header_len: usize) {
        let doff = (header_len.min(MAX_HEADER_LEN) / 4) as u8;
        let b = &mut self.bytes_mut()[DATA_OFFSET];
        *b = (doff << 4) | (*b & 0x0f);
    }

    pub fn set_flags(&mut self, flags: u8) {
        self.bytes_mut()[FLAGS] = flags;
    }

    pub fn set_window(&mut self, window: u16) {
        write_u16(self.bytes_mut(), WINDOW, window);
    }

    pub fn set_checksum(&mut self, csum: u16) {
        write_u16(self.bytes_mut(), CHECKSUM, csum);
    }

    pub fn set_urgent(&mut self, urgent: u16) {
        write_u16(self.bytes_mut(), URGENT, urgent);
    }

    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_end();
        self.bytes_mut().get_mut(MIN_HEADER_LEN..end).unwrap_or(&mut [])
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = self.payload_range();
        &mut self.bytes_mut()[range]
    }

    fn fill_with_pseudo(&mut self, pseudo: u64) {
        self.set_checksum(0);
        let csum = !checksum::fold(pseudo + checksum::sum_be16(self.bytes()));
        self.set_checksum(csum);
    }

    /// Checksum over the IPv4 pseudo-header and the whole view (length saturates at
    /// 65535 for oversized views, which cannot be valid IPv4 segments anyway).
    pub fn fill_checksum_v4(&mut self, src: &[u8; 4], dst: &[u8; 4]) {
        let len = u16::try_from(self.bytes().len()).unwrap_or(u16::MAX);
        self.fill_with_pseudo(checksum::pseudo_header_v4(src, dst, IPPROTO_TCP, len));
    }

    pub fn fill_checksum_v6(&mut self, src: &[u8; 16], dst: &[u8; 16]) {
        let len = self.l4_len_u32();
        self.fill_with_pseudo(checksum::pseudo_header_v6(src, dst, IPPROTO_TCP, len));
    }
}

/// One parsed TCP option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpOption<'a> {
    EndOfList,
    Nop,
    Mss(u16),
    WindowScale(u8),
    SackPermitted,
    /// 1 to 4 blocks of (left edge, right edge), 8 bytes each; see [`sack_blocks`].
    Sack(&'a [u8]),
    Timestamp {
        tsval: u32,
        tsecr: u32,
    },
    Unknown {
        kind: u8,
        data: &'a [u8],
    },
}

/// The (left, right) edges in the data of a [`TcpOption::Sack`].
pub fn sack_blocks(data: &[u8]) -> impl Iterator<Item = (u32, u32)> + '_ {
    data.chunks_exact(8).map(|block| (read_u32(block, 0), read_u32(block, 4)))
}

impl TcpOption<'_> {
    /// Bytes this option takes on the wire.
    pub fn wire_len(&self) -> usize {
        match self {
            TcpOption::EndOfList | TcpOption::Nop => 1,
            TcpOption::Mss(_) => 4,
            TcpOption::WindowScale(_) => 3,
            TcpOption::SackPermitted => 2,
            TcpOption::Sack(blocks) => 2 + blocks.len(),
            TcpOption::Timestamp { .. } => 10,
            TcpOption::Unknown { data, .. } => 2 + data.len(),
        }
    }

    /// Writes the option at the start of `out`, returning the bytes written.
    /// Truncated if `out` is too short; Malformed for a SACK that is not 1..=4 whole
    /// blocks, or an Unknown with kind 0/1 or data too long for the length byte.
    pub fn emit(&self, out: &mut [u8]) -> Result<usize> {
        let len = self.wire_len();
        let (kind, body): (u8, &[u8]) = match self {
            TcpOption::Sack(blocks) => {
                if blocks.is_empty() || blocks.len() % 8 != 0 || blocks.len() > 32 {
                    return Err(WireError::Malformed);
                }
                (option_kind::SACK, blocks)
            }
            TcpOption::Unknown { kind, data } => {
                if *kind <= option_kind::NOP || data.len() > 253 {
                    return Err(WireError::Malformed);
                }
                (*kind, data)
            }
            _ => (0, &[]),
        };
        let out = out.get_mut(..len).ok_or(WireError::Truncated)?;
        match *self {
            TcpOption::EndOfList => out[0] = option_kind::END_OF_LIST,
            TcpOption::Nop => out[0] = option_kind::NOP,
            TcpOption::Mss(mss) => {
                out[..2].copy_from_slice(&[option_kind::MSS, 4]);
                write_u16(out, 2, mss);
            }
            TcpOption::WindowScale(shift) => {
                out.copy_from_slice(&[option_kind::WINDOW_SCALE, 3, shift]);
            }
            TcpOption::SackPermitted => {
                out.copy_from_slice(&[option_kind::SACK_PERMITTED, 2]);
            }
            TcpOption::Timestamp { tsval, tsecr } => {
                out[..2].copy_from_slice(&[option_kind::TIMESTAMP, 10]);
                write_u32(out, 2, tsval);
                write_u32(out, 6, tsecr);
            }
            TcpOption::Sack(_) | TcpOption::Unknown { .. } => {
                out[0] = kind;
                out[1] = len as u8;
                out[2..].copy_from_slice(body);
            }
        }
        Ok(len)
    }
}

/// Iterator over options bytes. Yields `EndOfList` once and stops (the rest is padding);
/// on a missing or impossible length byte, an option running past the end, or a known
/// option with the wrong length it yields one `Err` and stops.
#[derive(Debug, Clone)]
pub struct TcpOptions<'a> {
    rest: &'a [u8],
}

impl<'a> TcpOptions<'a> {
    pub fn new(options: &'a [u8]) -> Self {
        Self { rest: options }
    }

    fn parse_one(&mut self) -> Result<TcpOption<'a>> {
        let rest = self.rest;
        let kind = rest[0];
        match kind {
            option_kind::END_OF_LIST => {
                self.rest = &[];
                return Ok(TcpOption::EndOfList);
            }
            option_kind::NOP => {
                self.rest = &rest[1..];
                return Ok(TcpOption::Nop);
            }
            _ => {}
        }
        let len = usize::from(*rest.get(1).ok_or(WireError::Truncated)?);
        if len < 2 {
            return Err(WireError::Malformed);
        }
        let option = rest.get(..len).ok_or(WireError::Truncated)?;
        let data = &option[2..];
        let parsed = match (kind, len) {
            (option_kind::MSS, 4) => TcpOption::Mss(read_u16(data, 0)),
            (option_kind::WINDOW_SCALE, 3) => TcpOption::WindowScale(data[0]),
            (option_kind::SACK_PERMITTED, 2) => TcpOption::SackPermitted,
            (option_kind::SACK, 10 | 18 | 26 | 34) => TcpOption::Sack(data),
            (option_kind::TIMESTAMP, 10) => TcpOption::Timestamp { tsval: read_u32(data, 0), tsecr: read_u32(data, 4) },
            (
                option_kind::MSS | option_kind::WINDOW_SCALE | option_kind::SACK_PERMITTED | option_kind::SACK | option_kind::TIMESTAMP,
                _,
            ) => return Err(WireError::Malformed),
            _ => TcpOption::Unknown { kind, data },
        };
        self.rest = &rest[len..];
        Ok(parsed)
    }
}

impl<'a> Iterator for TcpOptions<'a> {
    type Item = Result<TcpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let item = self.parse_one();
        if item.is_err() {
            self.rest = &[];
        }
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SRC: [u8; 4] = [10, 0, 0, 1];
    const DST: [u8; 4] = [10, 0, 0, 2];

    /// SYN with MSS 1460, SACK permitted, timestamps, NOP, window scale 7 (Linux layout).
    fn syn() -> Vec<u8> {
        let mut b = vec![0u8; 40];
        let mut p = TcpPacket::new_unchecked(&mut b[..]);
        p.set_src_port(40000);
        p.set_dst_port(80);
        p.set_seq(0x0102_0304);
        p.set_ack(0);
        p.set_header_len(40);
        p.set_flags(flags::SYN);
        p.set_window(64240);
        let opts = p.options_mut();
        let mut at = 0;
        for o in [
            TcpOption::Mss(1460),
            TcpOption::SackPermitted,
            TcpOption::Timestamp { tsval: 0xdead_beef, tsecr: 0 },
            TcpOption::Nop,
            TcpOption::WindowScale(7),
        ] {
            at += o.emit(&mut opts[at..]).unwrap();
        }
        assert_eq!(at, 20);
        p.fill_checksum_v4(&SRC, &DST);
        b
    }

    #[test]
    fn parse_syn() {
        let b = syn();
        let p = TcpPacket::new_checked(&b[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port()), (40000, 80));
        assert_eq!((p.seq(), p.ack()), (0x0102_0304, 0));
        assert_eq!(p.header_len(), 40);
        assert_eq!(p.flags(), flags::SYN);
        assert_eq!(p.window(), 64240);
        assert_eq!(p.urgent(), 0);
        assert!(p.payload().is_empty());
        assert_eq!(&p.options()[..8], &[2, 4, 0x05, 0xb4, 4, 2, 8, 10], "on-wire layout");
        let opts: Vec<_> = p.options_iter().collect();
        assert_eq!(
            opts,
            vec![
                Ok(TcpOption::Mss(1460)),
                Ok(TcpOption::SackPermitted),
                Ok(TcpOption::Timestamp { tsval: 0xdead_beef, tsecr: 0 }),
                Ok(TcpOption::Nop),
                Ok(TcpOption::WindowScale(7)),
            ]
        );
        assert!(p.verify_checksum_v4(&SRC, &DST));
        assert!(!p.verify_checksum_v4(&DST, &SRC.map(|x| x ^ 1)));
    }

    #[test]
    fn checksum_v6_and_payload() {
        let src = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let dst = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        let mut b = vec![0u8; 25];
        let mut p = TcpPacket::new_unchecked(&mut b[..]);
        p.set_header_len(20);
        p.set_flags(flags::ACK | flags::PSH);
        p.payload_mut().copy_from_slice(b"hello");
        p.fill_checksum_v6(&src, &dst);
        let p = TcpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.payload(), b"hello");
        assert!(p.options().is_empty());
        assert!(p.verify_checksum_v6(&src, &dst));
        assert!(!p.verify_checksum_v6(&dst, &src.map(|x| x ^ 1)), "another pseudo-header");
        // Independent sum over pseudo-header bytes + segment.
        let mut all = Vec::new();
        all.extend_from_slice(&src);
        all.extend_from_slice(&dst);
        all.extend_from_slice(&25u32.to_be_bytes());
        all.extend_from_slice(&[0, 0, 0, 6]);
        all.extend_from_slice(&b);
        assert!(checksum::verifies(checksum::sum_be16(&all)));
    }

    #[test]
    fn check_len_errors() {
        let b = syn();
        let check = |b: &[u8]| TcpPacket::new_checked(b).map(|_| ());
        assert_eq!(check(&b[..19]), Err(WireError::Truncated));
        assert_eq!(check(&b[..39]), Err(WireError::Truncated), "options cut");
        let mut bad = b.clone();
        bad[12] = 0x40;
        assert_eq!(check(&bad), Err(WireError::Malformed), "doff 4");
        // Unchecked with doff 15 over 20 bytes: clamped, no panic.
        let mut short = b[..20].to_vec();
        short[12] = 0xf0;
        let p = TcpPacket::new_unchecked(&short[..]);
        assert!(p.options().is_empty());
        assert!(p.payload().is_empty());
    }

    #[test]
    fn options_errors_stop_iteration() {
        let cases: [(&[u8], Vec<Result<TcpOption>>); 7] = [
            (&[1, 1, 2], vec![Ok(TcpOption::Nop), Ok(TcpOption::Nop), Err(WireError::Truncated)]),
            (&[2, 4, 5], vec![Err(WireError::Truncated)]),
            (&[2, 3, 5, 1, 1], vec![Err(WireError::Malformed)]),
            (&[30, 1, 1, 1], vec![Err(WireError::Malformed)]),
            (&[30, 0, 1, 1], vec![Err(WireError::Malformed)]),
            (&[5, 6, 0, 0, 0, 0], vec![Err(WireError::Malformed)]),
            (&[30, 3, 9, 0, 2, 4], vec![Ok(TcpOption::Unknown { kind: 30, data: &[9] }), Ok(TcpOption::EndOfList)]),
        ];
        for (bytes, expected) in cases {
            let got: Vec<_> = TcpOptions::new(bytes).collect();
            assert_eq!(got, expected, "{bytes:?}");
        }
    }

    #[test]
    fn sack_round_trip() {
        let mut blocks = [0u8; 16];
        blocks[..8].copy_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2]);
        blocks[8..].copy_from_slice(&[0, 0, 1, 0, 0, 0, 2, 0]);
        let mut out = [0u8; 18];
        assert_eq!(TcpOption::Sack(&blocks).emit(&mut out), Ok(18));
        let parsed: Vec<_> = TcpOptions::new(&out).collect();
        assert_eq!(parsed, vec![Ok(TcpOption::Sack(&blocks[..]))]);
        let edges: Vec<_> = sack_blocks(&blocks).collect();
        assert_eq!(edges, vec![(1, 2), (0x100, 0x200)]);
        assert_eq!(TcpOption::Sack(&blocks[..7]).emit(&mut out), Err(WireError::Malformed));
        assert_eq!(TcpOption::Mss(1).emit(&mut out[..3]), Err(WireError::Truncated));
    }

    /// An option's length byte counts kind and length too: 253 data bytes are the most
    /// (length 255), 254 do not fit.
    #[test]
    fn an_unknown_option_holds_at_most_253_bytes() {
        let data = [7u8; 254];
        let mut out = [0u8; 256];
        assert_eq!(TcpOption::Unknown { kind: 200, data: &data[..253] }.emit(&mut out), Ok(255));
        assert_eq!(&out[..3], &[200, 255, 7]);
        assert_eq!(TcpOption::Unknown { kind: 200, data: &data }.emit(&mut out), Err(WireError::Malformed));
    }

    fn option_strategy() -> impl Strategy<Value = (u8, u16, u32, u32, Vec<u8>)> {
        (0u8..7, any::<u16>(), any::<u32>(), any::<u32>(), proptest::collection::vec(any::<u8>(), 0..40))
    }

    proptest! {
        #[test]
        fn checked_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200),
                                plausible in any::<bool>()) {
            let mut bytes = bytes;
            if plausible && bytes.len() >= MIN_HEADER_LEN {
                let max_doff = (bytes.len() / 4).min(15) as u8;
                bytes[12] = (5 + bytes[12] % (max_doff - 4)) << 4;
            }
            if bytes.len() >= MIN_HEADER_LEN {
                let p = TcpPacket::new_unchecked(&bytes[..]);
                let _ = (p.src_port(), p.dst_port(), p.seq(), p.ack(), p.header_len());
                let _ = (p.flags(), p.window(), p.checksum(), p.urgent(), p.options(), p.payload());
                let _ = (p.verify_checksum_v4(&SRC, &DST), p.verify_checksum_v6(&[1; 16], &[2; 16]));
                prop_assert!(p.options_iter().count() <= p.options().len());
            }
            if let Ok(p) = TcpPacket::new_checked(&bytes[..]) {
                prop_assert_eq!(p.options().len(), p.header_len() - MIN_HEADER_LEN);
                prop_assert_eq!(p.payload().len(), bytes.len() - p.header_len());
                prop_assert_eq!(p.into_payload(), p.payload());
                for option in p.options_iter() {
                    if let Ok(TcpOption::Sack(blocks)) = option {
                        prop_assert!(sack_blocks(blocks).count() >= 1);
                    }
                }
                let mut copy = bytes.clone();
                let mut m = TcpPacket::new_checked(&mut copy[..]).unwrap();
                m.fill_checksum_v4(&SRC, &DST);
                prop_assert!(m.verify_checksum_v4(&SRC, &DST));
                m.fill_checksum_v6(&[1; 16], &[2; 16]);
                prop_assert!(m.verify_checksum_v6(&[1; 16], &[2; 16]));
            }
        }

        #[test]
        fn options_iter_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let mut errors = 0;
            for item in TcpOptions::new(&bytes) {
                if item.is_err() {
                    errors += 1;
                }
            }
            prop_assert!(errors <= 1);
        }

        #[test]
        fn emit_then_parse((which, a, b, c, data) in option_strategy()) {
            let sack_len = (data.len() / 8).clamp(1, 4) * 8;
            let padded: Vec<u8> = data.iter().copied().chain(core::iter::repeat(0)).take(sack_len).collect();
            let option = match which {
                0 => TcpOption::Nop,
                1 => TcpOption::Mss(a),
                2 => TcpOption::WindowScale(a as u8),
                3 => TcpOption::SackPermitted,
                4 => TcpOption::Sack(&padded),
                5 => TcpOption::Timestamp { tsval: b, tsecr: c },
                _ => TcpOption::Unknown { kind: 200, data: &data },
            };
            let mut out = [0u8; 64];
            let n = option.emit(&mut out).unwrap();
            prop_assert_eq!(n, option.wire_len());
            let parsed: Vec<_> = TcpOptions::new(&out[..n]).collect();
            prop_assert_eq!(parsed, vec![Ok(option)]);
        }
    }
}
