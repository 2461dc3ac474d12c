//! Tristate numbers ("known bits"): every bit is known 0, known 1, or unknown.
//!
//! `value` holds the known-one bits, `mask` the unknown bits; `value & mask == 0` always.
//! All arithmetic wraps modulo 2^64 like the machine does, so every operation is a sound
//! over-approximation of the concrete operation on every member of the operands' sets.

#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub(crate) struct Tnum {
    pub value: u64,
    pub mask: u64,
}

impl Tnum {
    pub const UNKNOWN: Tnum = Tnum { value: 0, mask: u64::MAX };

    pub const fn konst(v: u64) -> Tnum {
        Tnum { value: v, mask: 0 }
    }

    /// The smallest tnum holding every value of `[min, max]`: the common high prefix is known.
    pub fn range(min: u64, max: u64) -> Tnum {
        if min > max {
            return Tnum::UNKNOWN;
        }
        let chi = min ^ max;
        let bits = 64 - chi.leading_zeros();
        if bits >= 64 {
            return Tnum::UNKNOWN;
        }
        let delta = (1u64 << bits) - 1;
        Tnum { value: min & !delta, mask: delta }
    }

    pub fn is_const(self) -> bool {
        self.mask == 0
    }

    pub fn umin(self) -> u64 {
        self.value
    }

    pub fn umax(self) -> u64 {
        self.value | self.mask
    }

    /// Signed bounds implied by the known bits.
    pub fn sbounds(self) -> (i64, i64) {
        const SIGN: u64 = 1 << 63;
        if self.mask & SIGN != 0 {
            // Sign unknown: smallest has the sign set and other unknowns clear, largest the reverse.
            ((self.value | SIGN) as i64, ((self.value | self.mask) & !SIGN) as i64)
        } else {
            // Sign known: the interval is ordered the same way signed and unsigned.
            (self.value as i64, (self.value | self.mask) as i64)
        }
    }

    pub fn add(self, o: Tnum) -> Tnum {
        let sm = self.mask.wrapping_add(o.mask);
        let sv = self.value.wrapping_add(o.value);
        let sigma = sm.wrapping_add(sv);
        // Bits that may differ between the all-unknown-0 and all-unknown-1 sums, plus the inputs' unknowns.
        let chi = sigma ^ sv;
        let mu = chi | self.mask | o.mask;
        Tnum { value: sv & !mu, mask: mu }
    }

    pub fn sub(self, o: Tnum) -> Tnum {
        let dv = self.value.wrapping_sub(o.value);
        let alpha = dv.wrapping_add(self.mask);
        let beta = dv.wrapping_sub(o.mask);
        let chi = alpha ^ beta;
        let mu = chi | self.mask | o.mask;
        Tnum { value: dv & !mu, mask: mu }
    }

    pub fn and(self, o: Tnum) -> Tnum {
        let alpha = self.value | self.mask;
        let beta = o.value | o.mask;
        let v = self.value & o.value;
        Tnum { value: v, mask: alpha & beta & !v }
    }

    pub fn or(self, o: Tnum) -> Tnum {
        let v = self.value | o.value;
        let mu = self.mask | o.mask;
        Tnum { value: v, mask: mu & !v }
    }

    pub fn xor(self, o: Tnum) -> Tnum {
        let v = self.value ^ o.value;
        let mu = self.mask | o.mask;
        Tnum { value: v & !mu, mask: mu }
    }

    /// a*b = av*bv + av*bm' + am'*b, where am'/bm' are the (unknown) parts under the masks:
    /// each set bit i of av adds "0 or some subset of bm<<i", each unknown bit i of a adds
    /// "0 or b<<i"; summing those as tnums over-approximates every concrete product.
    pub fn mul(self, o: Tnum) -> Tnum {
        let mut acc = Tnum::konst(self.value.wrapping_mul(o.value));
        for i in 0..64u32 {
            let bit = 1u64 << i;
            if self.value & bit != 0 && o.mask != 0 {
                acc = acc.add(Tnum { value: 0, mask: o.mask << i });
            } else if self.mask & bit != 0 {
                acc = acc.add(Tnum { value: 0, mask: (o.value | o.mask) << i });
            }
        }
        acc
    }

    pub fn lsh(self, s: u32) -> Tnum {
        if s >= 64 {
            return Tnum::konst(0);
        }
        Tnum { value: self.value << s, mask: self.mask << s }
    }

    pub fn rsh(self, s: u32) -> Tnum {
        if s >= 64 {
            return Tnum::konst(0);
        }
        Tnum { value: self.value >> s, mask: self.mask >> s }
    }

    /// Arithmetic shift of the 64-bit value: copies of the sign bit (known or unknown) shift in.
    pub fn arsh(self, s: u32) -> Tnum {
        let s = s.min(63);
        Tnum { value: ((self.value as i64) >> s) as u64, mask: ((self.mask as i64) >> s) as u64 }
    }

    /// Values in both; `None` when the known bits contradict (the set is empty).
    pub fn intersect(self, o: Tnum) -> Option<Tnum> {
        if (self.value ^ o.value) & !(self.mask | o.mask) != 0 {
            return None;
        }
        let v = self.value | o.value;
        let mu = self.mask & o.mask;
        Some(Tnum { value: v & !mu, mask: mu })
    }

    /// Does `self` contain every value of `o`?
    pub fn contains(self, o: Tnum) -> bool {
        o.mask & !self.mask == 0 && (o.value & !self.mask) == self.value
    }

    /// The low `bits` bits (zero-extended).
    pub fn trunc(self, bits: u32) -> Tnum {
        if bits >= 64 {
            return self;
        }
        let m = (1u64 << bits) - 1;
        Tnum { value: self.value & m, mask: self.mask & m }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The edges of the shifts, `range` and `trunc`: a shift by 64 or more leaves nothing,
    /// an arithmetic shift saturates at 63 (sign copies), an empty range is unknown, and
    /// truncating to 64 bits or more is the identity.
    #[test]
    fn shift_range_and_trunc_edges() {
        let t = Tnum { value: 0x8000_0000_0000_0010, mask: 0x0f00 };
        assert_eq!(t.lsh(64), Tnum::konst(0));
        assert_eq!(t.rsh(64), Tnum::konst(0));
        assert_eq!(t.lsh(63), Tnum::konst(0), "bit 4 and the unknown bits shift out");
        assert_eq!(t.rsh(63), Tnum::konst(1));
        assert_eq!(t.arsh(64), Tnum::konst(u64::MAX), "a known sign bit copied everywhere");
        assert_eq!(Tnum::range(5, 4), Tnum::UNKNOWN);
        assert_eq!(Tnum::range(4, 4), Tnum::konst(4));
        assert_eq!(t.trunc(64), t);
        assert_eq!(t.trunc(70), t);
        assert_eq!(t.trunc(8), Tnum::konst(0x10));
    }

    /// Signed bounds are exact when the sign bit is known (either sign), and span both signs
    /// only when it is not.
    #[test]
    fn signed_bounds_follow_a_known_sign_bit() {
        assert_eq!(Tnum { value: 0x10, mask: 0x0f }.sbounds(), (16, 31));
        let neg = Tnum { value: 0x8000_0000_0000_0010, mask: 0x0f };
        assert_eq!(neg.sbounds(), (i64::MIN + 16, i64::MIN + 31));
        assert_eq!(Tnum { value: 0x10, mask: 0x8000_0000_0000_000f }.sbounds(), (i64::MIN + 16, 31));
    }

    fn members(t: Tnum) -> Vec<u64> {
        // Enumerate (small masks only).
        let bits: Vec<u32> = (0..64).filter(|i| t.mask >> i & 1 == 1).collect();
        (0..(1u64 << bits.len()))
            .map(|k| {
                let mut v = t.value;
                for (j, b) in bits.iter().enumerate() {
                    if k >> j & 1 == 1 {
                        v |= 1 << b;
                    }
                }
                v
            })
            .collect()
    }

    #[test]
    fn ops_are_sound_on_small_sets() {
        let samples = [
            Tnum::konst(0),
            Tnum::konst(5),
            Tnum { value: 4, mask: 3 },
            Tnum { value: 0x10, mask: 0x101 },
            Tnum { value: 1 << 63, mask: 6 },
            Tnum { value: 0, mask: 0x8000_0000_0000_0007 },
        ];
        for a in samples {
            for b in samples {
                for x in members(a) {
                    for y in members(b) {
                        assert!(a.add(b).contains(Tnum::konst(x.wrapping_add(y))));
                        assert!(a.sub(b).contains(Tnum::konst(x.wrapping_sub(y))));
                        assert!(a.mul(b).contains(Tnum::konst(x.wrapping_mul(y))));
                        assert!(a.and(b).contains(Tnum::konst(x & y)));
                        assert!(a.or(b).contains(Tnum::konst(x | y)));
                        assert!(a.xor(b).contains(Tnum::konst(x ^ y)));
                    }
                    for s in [0u32, 1, 3, 31, 63] {
                        assert!(a.lsh(s).contains(Tnum::konst(x << s)));
                        assert!(a.rsh(s).contains(Tnum::konst(x >> s)));
                        assert!(a.arsh(s).contains(Tnum::konst(((x as i64) >> s) as u64)));
                    }
                    let (lo, hi) = a.sbounds();
                    assert!(lo <= x as i64 && x as i64 <= hi);
                }
            }
        }
        assert_eq!(Tnum::range(4, 7), Tnum { value: 4, mask: 3 });
        assert_eq!(Tnum::range(0, u64::MAX), Tnum::UNKNOWN);
    }
}
