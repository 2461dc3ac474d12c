//! The abstract value of a 64-bit scalar: unsigned and signed interval plus known bits.
//!
//! Every transfer function over-approximates: for all concrete inputs in the operands' sets,
//! the concrete result is in the returned set. When a precise rule is not obviously sound,
//! the code falls back to "unknown" rather than guessing.

use super::tnum::Tnum;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Scalar {
    pub umin: u64,
    pub umax: u64,
    pub smin: i64,
    pub smax: i64,
    pub t: Tnum,
}

/// Binary ALU operations (after decoding the opcode and the signed-division `off` flag).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum AluOp {
    Add,
    Sub,
    Mul,
    Div,
    SDiv,
    Mod,
    SMod,
    Or,
    And,
    Xor,
    Lsh,
    Rsh,
    Arsh,
}

/// Conditional-jump relations ("dst REL src" holds).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Cmp {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Sgt,
    Sge,
    Slt,
    Sle,
    Set,
    NotSet,
}

impl Cmp {
    pub fn negate(self) -> Cmp {
        match self {
            Cmp::Eq => Cmp::Ne,
            Cmp::Ne => Cmp::Eq,
            Cmp::Gt => Cmp::Le,
            Cmp::Le => Cmp::Gt,
            Cmp::Ge => Cmp::Lt,
            Cmp::Lt => Cmp::Ge,
            Cmp::Sgt => Cmp::Sle,
            Cmp::Sle => Cmp::Sgt,
            Cmp::Sge => Cmp::Slt,
            Cmp::Slt => Cmp::Sge,
            Cmp::Set => Cmp::NotSet,
            Cmp::NotSet => Cmp::Set,
        }
    }

    /// The same relation with the operands exchanged.
    pub fn swap(self) -> Cmp {
        match self {
            Cmp::Gt => Cmp::Lt,
            Cmp::Lt => Cmp::Gt,
            Cmp::Ge => Cmp::Le,
            Cmp::Le => Cmp::Ge,
            Cmp::Sgt => Cmp::Slt,
            Cmp::Slt => Cmp::Sgt,
            Cmp::Sge => Cmp::Sle,
            Cmp::Sle => Cmp::Sge,
            other => other,
        }
    }

    pub fn is_signed(self) -> bool {
        matches!(self, Cmp::Sgt | Cmp::Sge | Cmp::Slt | Cmp::Sle)
    }
}

impl Scalar {
    pub const UNKNOWN: Scalar = Scalar { umin: 0, umax: u64::MAX, smin: i64::MIN, smax: i64::MAX, t: Tnum::UNKNOWN };

    pub const fn konst(v: u64) -> Scalar {
        Scalar { umin: v, umax: v, smin: v as i64, smax: v as i64, t: Tnum::konst(v) }
    }

    /// `[0, 2^bits - 1]`: a zero-extended value of `bits` bits.
    pub fn bounded(bits: u32) -> Scalar {
        if bits >= 64 {
            return Scalar::UNKNOWN;
        }
        let m = (1u64 << bits) - 1;
        Scalar { umin: 0, umax: m, smin: 0, smax: m as i64, t: Tnum { value: 0, mask: m } }
    }

    pub fn urange(lo: u64, hi: u64) -> Scalar {
        Scalar { umin: lo, umax: hi, ..Scalar::UNKNOWN }.norm()
    }

    pub fn as_const(&self) -> Option<u64> {
        if self.t.is_const() {
            Some(self.t.value)
        } else if self.umin == self.umax {
            Some(self.umin)
        } else {
            None
        }
    }

    /// Tightens every component from the others; `None` if the set is empty
    /// (only possible after a branch refinement: the branch is then infeasible).
    pub fn sync(mut self) -> Option<Scalar> {
        for _ in 0..3 {
            let before = self;
            self.umin = self.umin.max(self.t.umin());
            self.umax = self.umax.min(self.t.umax());
            let (tlo, thi) = self.t.sbounds();
            self.smin = self.smin.max(tlo);
            self.smax = self.smax.min(thi);
            // A signed interval on one side of zero is the same set as an unsigned one.
            if self.smin >= 0 || self.smax < 0 {
                self.umin = self.umin.max(self.smin as u64);
                self.umax = self.umax.min(self.smax as u64);
            }
            // An unsigned interval within one half of the space is ordered the same signed.
            if (self.umin as i64) <= (self.umax as i64) {
                self.smin = self.smin.max(self.umin as i64);
                self.smax = self.smax.min(self.umax as i64);
            }
            if self.umin > self.umax || self.smin > self.smax {
                return None;
            }
            self.t = self.t.intersect(Tnum::range(self.umin, self.umax))?;
            if self.t.umin() > self.umax || self.t.umax() < self.umin {
                return None;
            }
            if self == before {
                break;
            }
        }
        Some(self)
    }

    /// For results of ALU ops, which are never empty: a (theoretically impossible)
    /// contradiction degrades to "unknown" instead of being trusted.
    pub fn norm(self) -> Scalar {
        self.sync().unwrap_or(Scalar::UNKNOWN)
    }

    /// Does `self` contain every value of `o`?
    pub fn contains(&self, o: &Scalar) -> bool {
        self.umin <= o.umin && o.umax <= self.umax && self.smin <= o.smin && o.smax <= self.smax && self.t.contains(o.t)
    }

    /// Values in both (the operands describe the same concrete value).
    pub fn meet(&self, o: &Scalar) -> Option<Scalar> {
        Scalar {
            umin: self.umin.max(o.umin),
            umax: self.umax.min(o.umax),
            smin: self.smin.max(o.smin),
            smax: self.smax.min(o.smax),
            t: self.t.intersect(o.t)?,
        }
        .sync()
    }

    /// The low `bits` bits, zero-extended (a 32-bit subregister, or a narrow load of a spill).
    pub fn trunc(self, bits: u32) -> Scalar {
        if bits >= 64 {
            return self;
        }
        let m = (1u64 << bits) - 1;
        let (lo, hi) = if self.umax <= m {
            (self.umin, self.umax)
        } else if self.umin >> bits == self.umax >> bits {
            // No wrap inside the interval: the low bits keep their order.
            (self.umin & m, self.umax & m)
        } else {
            (0, m)
        };
        Scalar { umin: lo, umax: hi, smin: lo as i64, smax: hi as i64, t: self.t.trunc(bits) }
            .sync()
            .unwrap_or_else(|| Scalar::bounded(bits))
    }

    /// The low `bits` bits, sign-extended to 64.
    pub fn sext(self, bits: u32) -> Scalar {
        if bits >= 64 {
            return self;
        }
        if bits == 0 {
            return Scalar::konst(0);
        }
        let z = self.trunc(bits);
        let half = 1u64 << (bits - 1);
        let m = (1u64 << bits) - 1;
        let fallback = Scalar { smin: -(half as i64), smax: (half - 1) as i64, ..Scalar::UNKNOWN };
        if z.umax < half {
            return z;
        }
        if z.umin >= half {
            // All negative: sign extension is "or the high ones in", which is monotone.
            let lo = z.umin | !m;
            let hi = z.umax | !m;
            return Scalar { umin: lo, umax: hi, smin: lo as i64, smax: hi as i64, t: Tnum { value: z.t.value | !m, mask: z.t.mask } }
                .sync()
                .unwrap_or(fallback);
        }
        Scalar { t: Tnum { value: z.t.value, mask: z.t.mask | !m }, ..fallback }.sync().unwrap_or(fallback)
    }

    /// Byte swap of the low `bits` bits (result zero-extended): known bytes move with the value.
    pub fn bswap(self, bits: u32) -> Scalar {
        let z = self.trunc(bits);
        let sw = |x: u64| -> u64 {
            match bits {
                16 => (x as u16).swap_bytes() as u64,
                32 => (x as u32).swap_bytes() as u64,
                _ => x.swap_bytes(),
            }
        };
        let t = Tnum { value: sw(z.t.value), mask: sw(z.t.mask) };
        Scalar { t, ..Scalar::bounded(bits) }.norm()
    }
}

/// Concrete 64-bit semantics, shared with the constant folder. Division by zero gives 0 and
/// modulo by zero leaves the dividend, as the kernel (and sluice's runtime) define them;
/// shift amounts are masked to the register width.
pub(crate) fn eval64(op: AluOp, x: u64, y: u64) -> u64 {
    match op {
        AluOp::Add => x.wrapping_add(y),
        AluOp::Sub => x.wrapping_sub(y),
        AluOp::Mul => x.wrapping_mul(y),
        AluOp::Div => x.checked_div(y).unwrap_or(0),
        AluOp::Mod => {
            if y == 0 {
                x
            } else {
                x % y
            }
        }
        AluOp::SDiv => {
            if y == 0 {
                0
            } else {
                (x as i64).wrapping_div(y as i64) as u64
            }
        }
        AluOp::SMod => {
            if y == 0 {
                x
            } else {
                (x as i64).wrapping_rem(y as i64) as u64
            }
        }
        AluOp::Or => x | y,
        AluOp::And => x & y,
        AluOp::Xor => x ^ y,
        AluOp::Lsh => x << (y & 63),
        AluOp::Rsh => x >> (y & 63),
        AluOp::Arsh => ((x as i64) >> (y & 63)) as u64,
    }
}

/// Concrete 32-bit semantics: the 64-bit operation on the low halves, widened as the signed
/// operations need (sign-extended) or zero-extended, shift amounts masked to 31; the low 32
/// bits of the result, zero-extended. (Every 32-bit result, `INT_MIN / -1` and division by
/// zero included, is the low half of the 64-bit one on inputs widened this way.)
pub(crate) fn eval32(op: AluOp, x: u64, y: u64) -> u64 {
    let signed = matches!(op, AluOp::SDiv | AluOp::SMod | AluOp::Arsh);
    let widen = |v: u64| if signed { v as u32 as i32 as i64 as u64 } else { v as u32 as u64 };
    let y = if matches!(op, AluOp::Lsh | AluOp::Rsh | AluOp::Arsh) { y & 31 } else { widen(y) };
    eval64(op, widen(x), y) as u32 as u64
}

/// Shift amounts are masked by the runtime; when the amount may reach the width, any
/// masked amount is possible.
fn shift_amount(b: Scalar, width: u64) -> Scalar {
    if b.umax < width {
        b
    } else {
        Scalar::urange(0, width - 1)
    }
}

pub(crate) fn alu64(op: AluOp, a: Scalar, b: Scalar) -> Scalar {
    if let (Some(x), Some(y)) = (a.as_const(), b.as_const()) {
        return Scalar::konst(eval64(op, x, y));
    }
    let u = Scalar::UNKNOWN;
    let r = match op {
        AluOp::Add => {
            let (umin, umax) = match (a.umin.checked_add(b.umin), a.umax.checked_add(b.umax)) {
                (Some(lo), Some(hi)) => (lo, hi),
                _ => (0, u64::MAX),
            };
            let (smin, smax) = match (a.smin.checked_add(b.smin), a.smax.checked_add(b.smax)) {
                (Some(lo), Some(hi)) => (lo, hi),
                _ => (i64::MIN, i64::MAX),
            };
            Scalar { umin, umax, smin, smax, t: a.t.add(b.t) }
        }
        AluOp::Sub => {
            let (umin, umax) = if a.umin >= b.umax { (a.umin - b.umax, a.umax - b.umin) } else { (0, u64::MAX) };
            let (smin, smax) = match (a.smin.checked_sub(b.smax), a.smax.checked_sub(b.smin)) {
                (Some(lo), Some(hi)) => (lo, hi),
                _ => (i64::MIN, i64::MAX),
            };
            Scalar { umin, umax, smin, smax, t: a.t.sub(b.t) }
        }
        AluOp::Mul => {
            let (umin, umax) = match a.umax.checked_mul(b.umax) {
                Some(hi) => (a.umin.saturating_mul(b.umin), hi),
                None => (0, u64::MAX),
            };
            let corners = [a.smin.checked_mul(b.smin), a.smin.checked_mul(b.smax), a.smax.checked_mul(b.smin), a.smax.checked_mul(b.smax)];
            let (smin, smax) = if corners.iter().all(|c| c.is_some()) {
                let vals = corners.map(|c| c.unwrap_or(0));
                (vals.iter().copied().min().unwrap_or(i64::MIN), vals.iter().copied().max().unwrap_or(i64::MAX))
            } else {
                (i64::MIN, i64::MAX)
            };
            Scalar { umin, umax, smin, smax, t: a.t.mul(b.t) }
        }
        AluOp::Div => match (b.umax, a.umax.checked_div(b.umin)) {
            (0, _) => Scalar::konst(0),
            // x/0 == 0 and x/y <= x otherwise.
            (_, None) => Scalar { umin: 0, umax: a.umax, ..u },
            (_, Some(hi)) => Scalar { umin: a.umin / b.umax, umax: hi, ..u },
        },
        AluOp::Mod => {
            if a.umax < b.umin || b.umax == 0 {
                // x % y == x when x < y, and x % 0 == x.
                a
            } else if b.umin == 0 {
                Scalar { umin: 0, umax: a.umax, ..u }
            } else {
                Scalar { umin: 0, umax: a.umax.min(b.umax - 1), ..u }
            }
        }
        AluOp::SDiv | AluOp::SMod => u,
        AluOp::And => Scalar { umin: 0, umax: a.umax.min(b.umax), t: a.t.and(b.t), ..u },
        AluOp::Or => Scalar { umin: a.umin.max(b.umin), t: a.t.or(b.t), ..u },
        AluOp::Xor => Scalar { t: a.t.xor(b.t), ..u },
        AluOp::Lsh => {
            let b = shift_amount(b, 64);
            let (lo, hi) = (b.umin as u32, b.umax as u32);
            let range = if a.umax.leading_zeros() >= hi { Some((a.umin << lo, a.umax << hi)) } else { None };
            let t = if lo == hi { a.t.lsh(lo) } else { Tnum::UNKNOWN.lsh(lo) };
            match range {
                Some((umin, umax)) => Scalar { umin, umax, t, ..u },
                None => Scalar { t, ..u },
            }
        }
        AluOp::Rsh => {
            if b.umax >= 64 {
                // Masked amount: anything from 0 to 63; a right shift never grows the value.
                Scalar { umin: 0, umax: a.umax, ..u }
            } else {
                let (lo, hi) = (b.umin as u32, b.umax as u32);
                let t = if lo == hi { a.t.rsh(lo) } else { Tnum::UNKNOWN.rsh(lo) };
                Scalar { umin: a.umin >> hi, umax: a.umax >> lo, t, ..u }
            }
        }
        AluOp::Arsh => {
            let b = shift_amount(b, 64);
            let (lo, hi) = (b.umin as u32, b.umax as u32);
            // x >> s is monotone in x, and monotone in s towards 0 or -1: corners bound it.
            let smin = (a.smin >> lo).min(a.smin >> hi);
            let smax = (a.smax >> lo).max(a.smax >> hi);
            let t = if lo == hi { a.t.arsh(lo) } else { Tnum::UNKNOWN };
            Scalar { smin, smax, t, ..u }
        }
    };
    r.norm()
}

pub(crate) fn alu32(op: AluOp, a: Scalar, b: Scalar) -> Scalar {
    let (a32, b32) = (a.trunc(32), b.trunc(32));
    if let (Some(x), Some(y)) = (a32.as_const(), b32.as_const()) {
        return Scalar::konst(eval32(op, x, y));
    }
    let r = match op {
        // The low 32 bits of these 64-bit results depend only on the operands' low 32 bits.
        AluOp::Add | AluOp::Sub | AluOp::Mul | AluOp::Or | AluOp::And | AluOp::Xor => alu64(op, a32, b32),
        // Unsigned division of zero-extended operands equals the 32-bit unsigned division.
        AluOp::Div | AluOp::Mod => alu64(op, a32, b32),
        AluOp::Lsh | AluOp::Rsh => alu64(op, a32, shift_amount(b32, 32)),
        AluOp::Arsh => alu64(AluOp::Arsh, a.sext(32), shift_amount(b32, 32)),
        AluOp::SDiv | AluOp::SMod => Scalar::UNKNOWN,
    };
    r.trunc(32)
}

/// Removes the single value `c` from `a` when it sits on a bound.
fn exclude(a: Scalar, c: u64) -> Option<Scalar> {
    if a.as_const() == Some(c) {
        return None;
    }
    let mut r = a;
    if r.umin == c {
        r.umin = c.wrapping_add(1);
    }
    if r.umax == c {
        r.umax = c.wrapping_sub(1);
    }
    if r.smin == c as i64 {
        r.smin = (c as i64).wrapping_add(1);
    }
    if r.smax == c as i64 {
        r.smax = (c as i64).wrapping_sub(1);
    }
    r.sync()
}

/// Narrows `a` and `b` assuming `a cmp b` holds on their 64-bit values; `None` when it cannot.
pub(crate) fn refine64(cmp: Cmp, a: Scalar, b: Scalar) -> Option<(Scalar, Scalar)> {
    match cmp {
        Cmp::Eq => {
            let m = a.meet(&b)?;
            Some((m, m))
        }
        Cmp::Ne => {
            let mut na = a;
            let mut nb = b;
            if let Some(c) = b.as_const() {
                na = exclude(a, c)?;
            }
            if let Some(c) = a.as_const() {
                nb = exclude(b, c)?;
            }
            Some((na, nb))
        }
        Cmp::Gt => {
            let lo = b.umin.checked_add(1)?;
            let hi = a.umax.checked_sub(1)?;
            let na = Scalar { umin: a.umin.max(lo), ..a }.sync()?;
            let nb = Scalar { umax: b.umax.min(hi), ..b }.sync()?;
            Some((na, nb))
        }
        Cmp::Ge => {
            let na = Scalar { umin: a.umin.max(b.umin), ..a }.sync()?;
            let nb = Scalar { umax: b.umax.min(a.umax), ..b }.sync()?;
            Some((na, nb))
        }
        Cmp::Sgt => {
            let lo = b.smin.checked_add(1)?;
            let hi = a.smax.checked_sub(1)?;
            let na = Scalar { smin: a.smin.max(lo), ..a }.sync()?;
            let nb = Scalar { smax: b.smax.min(hi), ..b }.sync()?;
            Some((na, nb))
        }
        Cmp::Sge => {
            let na = Scalar { smin: a.smin.max(b.smin), ..a }.sync()?;
            let nb = Scalar { smax: b.smax.min(a.smax), ..b }.sync()?;
            Some((na, nb))
        }
        Cmp::Lt | Cmp::Le | Cmp::Slt | Cmp::Sle => {
            let (nb, na) = refine64(cmp.swap(), b, a)?;
            Some((na, nb))
        }
        Cmp::Set => {
            if a.t.umax() & b.t.umax() == 0 {
                return None;
            }
            let mut na = a;
            let mut nb = b;
            // A single tested bit must be set.
            if let Some(c) = b.as_const() {
                if c.is_power_of_two() {
                    na = Scalar { t: a.t.intersect(Tnum { value: c, mask: !c })?, ..a }.sync()?;
                }
            }
            if let Some(c) = a.as_const() {
                if c.is_power_of_two() {
                    nb = Scalar { t: b.t.intersect(Tnum { value: c, mask: !c })?, ..b }.sync()?;
                }
            }
            Some((na, nb))
        }
        Cmp::NotSet => {
            if a.t.value & b.t.value != 0 {
                return None;
            }
            let mut na = a;
            let mut nb = b;
            // Every bit of a constant mask is clear in the other operand.
            if let Some(c) = b.as_const() {
                na = Scalar { t: a.t.intersect(Tnum { value: 0, mask: !c })?, ..a }.sync()?;
            }
            if let Some(c) = a.as_const() {
                nb = Scalar { t: b.t.intersect(Tnum { value: 0, mask: !c })?, ..b }.sync()?;
            }
            Some((na, nb))
        }
    }
}

/// JMP32: the relation holds on the low 32 bits. The projection decides feasibility; the
/// refined projection replaces the 64-bit value only when the projection is the value
/// itself, otherwise only the low known bits are carried back.
pub(crate) fn refine32(cmp: Cmp, a: Scalar, b: Scalar) -> Option<(Scalar, Scalar)> {
    let signed = cmp.is_signed();
    let proj = |s: Scalar| if signed { s.sext(32) } else { s.trunc(32) };
    let (ra, rb) = refine64(cmp, proj(a), proj(b))?;
    let lift = |orig: Scalar, r: Scalar| -> Option<Scalar> {
        let faithful = if signed { orig.smin >= i32::MIN as i64 && orig.smax <= i32::MAX as i64 } else { orig.umax <= u32::MAX as u64 };
        if faithful {
            return Some(r);
        }
        let low = Tnum { value: r.t.value & 0xffff_ffff, mask: r.t.mask | 0xffff_ffff_0000_0000 };
        Scalar { t: orig.t.intersect(low)?, ..orig }.sync()
    };
    Some((lift(a, ra)?, lift(b, rb)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sext's edges: 64 bits or more is the identity, 0 bits is the constant 0; a value
    /// whose bounds meet is a constant even when its tnum alone is not.
    #[test]
    fn sext_edges_and_constants_from_bounds() {
        let s = Scalar::bounded(16);
        assert_eq!(s.sext(64), s);
        assert_eq!(s.sext(65), s);
        assert_eq!(s.sext(0), Scalar::konst(0));
        let pinned = Scalar { umin: 7, umax: 7, smin: 7, smax: 7, t: Tnum { value: 0, mask: 7 } };
        assert_eq!(pinned.as_const(), Some(7));
        assert_eq!(Scalar::bounded(3).as_const(), None);
    }

    /// The relation on two concrete values, written out.
    fn holds(c: Cmp, a: u64, b: u64) -> bool {
        let (sa, sb) = (a as i64, b as i64);
        match c {
            Cmp::Eq => a == b,
            Cmp::Ne => a != b,
            Cmp::Gt => a > b,
            Cmp::Ge => a >= b,
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
            Cmp::Sgt => sa > sb,
            Cmp::Sge => sa >= sb,
            Cmp::Slt => sa < sb,
            Cmp::Sle => sa <= sb,
            Cmp::Set => a & b != 0,
            Cmp::NotSet => a & b == 0,
        }
    }

    /// `negate` is the relation that holds exactly when the jump is not taken, `swap` the
    /// same relation with the operands exchanged, for all twelve relations.
    #[test]
    fn negate_and_swap_are_the_relations_they_say() {
        use Cmp::*;
        let vals = [0u64, 1, 2, 0x7fff_ffff_ffff_ffff, 0x8000_0000_0000_0000, u64::MAX, 6];
        for c in [Eq, Ne, Gt, Ge, Lt, Le, Sgt, Sge, Slt, Sle, Set, NotSet] {
            for &a in &vals {
                for &b in &vals {
                    assert_eq!(holds(c.negate(), a, b), !holds(c, a, b), "{c:?}.negate() on {a:#x}, {b:#x}");
                    assert_eq!(holds(c.swap(), b, a), holds(c, a, b), "{c:?}.swap() on {a:#x}, {b:#x}");
                }
            }
        }
    }

    /// eval32 against the 32-bit operations written out directly.
    #[test]
    fn eval32_is_the_32_bit_operation() {
        let vals = [0u64, 1, 2, 31, 32, 33, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff, 0xffff_ffff_8000_0000, u64::MAX, 0x1234_5678_9abc_def0];
        let ops = [
            AluOp::Add,
            AluOp::Sub,
            AluOp::Mul,
            AluOp::Div,
            AluOp::SDiv,
            AluOp::Mod,
            AluOp::SMod,
            AluOp::Or,
            AluOp::And,
            AluOp::Xor,
            AluOp::Lsh,
            AluOp::Rsh,
            AluOp::Arsh,
        ];
        for op in ops {
            for &x in &vals {
                for &y in &vals {
                    let (a, b) = (x as u32, y as u32);
                    let want: u32 = match op {
                        AluOp::Add => a.wrapping_add(b),
                        AluOp::Sub => a.wrapping_sub(b),
                        AluOp::Mul => a.wrapping_mul(b),
                        AluOp::Div => a.checked_div(b).unwrap_or(0),
                        AluOp::Mod => a.checked_rem(b).unwrap_or(a),
                        AluOp::SDiv => {
                            if b == 0 {
                                0
                            } else {
                                (a as i32).wrapping_div(b as i32) as u32
                            }
                        }
                        AluOp::SMod => {
                            if b == 0 {
                                a
                            } else {
                                (a as i32).wrapping_rem(b as i32) as u32
                            }
                        }
                        AluOp::Or => a | b,
                        AluOp::And => a & b,
                        AluOp::Xor => a ^ b,
                        AluOp::Lsh => a << (b & 31),
                        AluOp::Rsh => a >> (b & 31),
                        AluOp::Arsh => ((a as i32) >> (b & 31)) as u32,
                    };
                    assert_eq!(eval32(op, x, y), want as u64, "{op:?} {x:#x} {y:#x}");
                }
            }
        }
    }

    fn samples() -> Vec<Scalar> {
        vec![
            Scalar::konst(0),
            Scalar::konst(7),
            Scalar::konst(u64::MAX),
            Scalar::urange(0, 15),
            Scalar::urange(3, 40),
            Scalar::urange(0xffff_fff0, 0x1_0000_0010),
            Scalar { smin: -5, smax: 5, ..Scalar::UNKNOWN }.norm(),
            // Negative only: an arithmetic shift moves these towards -1, so their upper bound
            // comes from the largest shift.
            Scalar { smin: -40, smax: -3, ..Scalar::UNKNOWN }.norm(),
            Scalar::bounded(8),
            Scalar { t: Tnum { value: 4, mask: 0x38 }, ..Scalar::UNKNOWN }.norm(),
        ]
    }

    fn members(s: &Scalar) -> Vec<u64> {
        let mut v: Vec<u64> = Vec::new();
        let cands: Vec<u64> = (0..64u64)
            .chain([s.umin, s.umax, s.smin as u64, s.smax as u64])
            .chain((0..64).map(|i| s.umin.wrapping_add(i)))
            .chain((0..64).map(|i| (s.smin as u64).wrapping_add(i)))
            .chain((0..64).map(|i| s.umax.wrapping_sub(i)))
            .collect();
        for c in cands {
            let ok = c >= s.umin && c <= s.umax && (c as i64) >= s.smin && (c as i64) <= s.smax && s.t.contains(Tnum::konst(c));
            if ok && !v.contains(&c) {
                v.push(c);
            }
        }
        v
    }

    fn has(s: &Scalar, x: u64) -> bool {
        s.contains(&Scalar::konst(x))
    }

    #[test]
    fn alu_transfer_functions_are_sound() {
        let ops = [
            AluOp::Add,
            AluOp::Sub,
            AluOp::Mul,
            AluOp::Div,
            AluOp::SDiv,
            AluOp::Mod,
            AluOp::SMod,
            AluOp::Or,
            AluOp::And,
            AluOp::Xor,
            AluOp::Lsh,
            AluOp::Rsh,
            AluOp::Arsh,
        ];
        for a in samples() {
            for b in samples() {
                for op in ops {
                    let r64 = alu64(op, a, b);
                    let r32 = alu32(op, a, b);
                    for x in members(&a) {
                        for y in members(&b) {
                            assert!(has(&r64, eval64(op, x, y)), "{op:?} {a:?} {b:?} x={x} y={y} r={r64:?}");
                            assert!(has(&r32, eval32(op, x, y)), "32 {op:?} {a:?} {b:?} x={x} y={y} r={r32:?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn refinement_keeps_satisfying_pairs() {
        let cmps = [Cmp::Eq, Cmp::Ne, Cmp::Gt, Cmp::Ge, Cmp::Lt, Cmp::Le, Cmp::Sgt, Cmp::Sge, Cmp::Slt, Cmp::Sle, Cmp::Set, Cmp::NotSet];
        let holds = |c: Cmp, x: u64, y: u64| match c {
            Cmp::Eq => x == y,
            Cmp::Ne => x != y,
            Cmp::Gt => x > y,
            Cmp::Ge => x >= y,
            Cmp::Lt => x < y,
            Cmp::Le => x <= y,
            Cmp::Sgt => (x as i64) > (y as i64),
            Cmp::Sge => (x as i64) >= (y as i64),
            Cmp::Slt => (x as i64) < (y as i64),
            Cmp::Sle => (x as i64) <= (y as i64),
            Cmp::Set => x & y != 0,
            Cmp::NotSet => x & y == 0,
        };
        let holds32 = |c: Cmp, x: u64, y: u64| {
            if c.is_signed() {
                holds(c, x as u32 as i32 as i64 as u64, y as u32 as i32 as i64 as u64)
            } else {
                holds(c, x as u32 as u64, y as u32 as u64)
            }
        };
        for a in samples() {
            for b in samples() {
                for c in cmps {
                    let r = refine64(c, a, b);
                    let r32 = refine32(c, a, b);
                    for x in members(&a) {
                        for y in members(&b) {
                            if holds(c, x, y) {
                                let (ra, rb) = r.unwrap_or_else(|| panic!("{c:?} lost {x} {y} {a:?} {b:?}"));
                                assert!(has(&ra, x) && has(&rb, y), "{c:?} {x} {y}");
                            }
                            if holds32(c, x, y) {
                                let (ra, rb) = r32.unwrap_or_else(|| panic!("32 {c:?} lost {x} {y}"));
                                assert!(has(&ra, x) && has(&rb, y), "32 {c:?} {x} {y} {a:?} {b:?} {ra:?}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn constants_decide_loops() {
        let i = Scalar::konst(16);
        assert!(refine64(Cmp::Lt, i, Scalar::konst(16)).is_none());
        assert!(refine64(Cmp::Ne, i, Scalar::konst(16)).is_none());
        assert!(refine32(Cmp::Ne, i, Scalar::konst(16)).is_none());
        let x = Scalar::bounded(8);
        let s = alu64(AluOp::Lsh, alu64(AluOp::And, x, Scalar::konst(15)), Scalar::konst(2));
        assert_eq!((s.umin, s.umax), (0, 60));
        assert_eq!(s.t.value & 3, 0);
        assert_eq!(s.t.mask & 3, 0);
    }

    #[test]
    fn mod_by_a_positive_range_is_below_its_top() {
        // x % y == x only when x < y; once x can reach y the remainder is at most y - 1.
        for y in [1u64, 8, 15, 255] {
            let r = alu64(AluOp::Mod, Scalar::urange(0, y), Scalar::konst(y));
            assert_eq!((r.umin, r.umax), (0, y - 1), "[0, {y}] % {y}");
        }
        let below = alu64(AluOp::Mod, Scalar::urange(3, 7), Scalar::konst(8));
        assert_eq!((below.umin, below.umax), (3, 7), "x < y: x itself");
    }

    /// Kernel scalar_min_max_lsh: without overflow the unsigned bounds shift with the value
    /// (umax << max shift), tighter than the tnum's: [0, 5] << 1 is [0, 10], not the
    /// tnum's [0, 14].
    #[test]
    fn a_left_shift_keeps_the_shifted_unsigned_maximum() {
        let r = alu64(AluOp::Lsh, Scalar::urange(0, 5), Scalar::konst(1));
        assert_eq!((r.umin, r.umax), (0, 10), "{r:?}");
    }

    /// Kernel coerce_reg_to_size / __reg32_deduce_bounds: when umin and umax agree above the
    /// low 32 bits, the low 32 bits keep their order and bounds ([2^32 + 1, 2^32 + 5] is
    /// [1, 5] as a 32-bit subregister); otherwise they may wrap and are [0, 2^32 - 1].
    #[test]
    fn truncation_keeps_bounds_that_share_their_upper_bits() {
        let r = Scalar::urange(0x1_0000_0001, 0x1_0000_0005).trunc(32);
        assert_eq!((r.umin, r.umax), (1, 5), "{r:?}");
        let w = Scalar::urange(0xffff_fffe, 0x1_0000_0001).trunc(32);
        assert_eq!((w.umin, w.umax), (0, 0xffff_ffff), "{w:?}");
    }
}
