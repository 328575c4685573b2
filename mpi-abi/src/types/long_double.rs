//! C's `long double` on x86-64: the x87 80-bit format in 16 bytes. Rust
//! has no such type, so its arithmetic runs on the x87 unit (small asm
//! blocks that push their operands, compute, and leave the x87 stack
//! empty as the ABI requires).

use std::arch::asm;

/// One `long double`.
#[repr(C, align(16))]
#[derive(Clone, Copy, Default, PartialEq)]
pub(crate) struct LongDouble(pub [u8; 16]);

// SAFETY: 16 plain bytes, no padding: every bit pattern is a valid
// value of this type (the x87 unit takes any as an operand).
unsafe impl bytemuck::Zeroable for LongDouble {}
// SAFETY: as above.
unsafe impl bytemuck::Pod for LongDouble {}

/// `a + b`, `a - b` or `a * b`.
#[derive(Clone, Copy)]
pub(crate) enum Arith {
    Add,
    Sub,
    Mul,
}

impl LongDouble {
    pub(crate) fn arith(self, op: Arith, b: LongDouble) -> LongDouble {
        let mut out = LongDouble::default();
        let (pa, pb, po) = (self.0.as_ptr(), b.0.as_ptr(), out.0.as_mut_ptr());
        // SAFETY: each block loads two 10-byte values from `pa` and
        // `pb` (16 valid bytes each), stores one to `po` (16 writable
        // bytes), and pops everything it pushed; the clobbered x87
        // registers are declared.
        unsafe {
            match op {
                Arith::Add => asm!(
                    "fld tbyte ptr [{a}]", "fld tbyte ptr [{b}]",
                    "faddp st(1), st", "fstp tbyte ptr [{o}]",
                    a = in(reg) pa, b = in(reg) pb, o = in(reg) po,
                    out("st(0)") _, out("st(1)") _, options(nostack)
                ),
                Arith::Sub => asm!(
                    "fld tbyte ptr [{a}]", "fld tbyte ptr [{b}]",
                    "fsubp st(1), st", "fstp tbyte ptr [{o}]",
                    a = in(reg) pa, b = in(reg) pb, o = in(reg) po,
                    out("st(0)") _, out("st(1)") _, options(nostack)
                ),
                Arith::Mul => asm!(
                    "fld tbyte ptr [{a}]", "fld tbyte ptr [{b}]",
                    "fmulp st(1), st", "fstp tbyte ptr [{o}]",
                    a = in(reg) pa, b = in(reg) pb, o = in(reg) po,
                    out("st(0)") _, out("st(1)") _, options(nostack)
                ),
            }
        }
        out
    }

    /// Zero (either sign): no mantissa bits and a zero exponent.
    pub(crate) fn is_zero(self) -> bool {
        self.0[..8].iter().all(|&b| b == 0) && self.0[8] == 0 && self.0[9] & 0x7f == 0
    }

    /// 1.0 or 0.0.
    pub(crate) fn from_bool(v: bool) -> LongDouble {
        let mut out = LongDouble::default();
        if v {
            // Mantissa 1.0 (explicit integer bit), exponent bias 0x3fff.
            out.0[7] = 0x80;
            out.0[8] = 0xff;
            out.0[9] = 0x3f;
        }
        out
    }

    /// `self < b` (false when unordered: NaN).
    pub(crate) fn less(self, b: LongDouble) -> bool {
        let (below, unordered): (u8, u8);
        // SAFETY: loads two values as above, compares and pops both;
        // only flags and the two output registers change.
        unsafe {
            asm!(
                "fld tbyte ptr [{b}]", "fld tbyte ptr [{a}]",
                "fucomip st, st(1)", "fstp st(0)",
                "setb {lt}", "setp {un}",
                a = in(reg) self.0.as_ptr(), b = in(reg) b.0.as_ptr(),
                lt = out(reg_byte) below, un = out(reg_byte) unordered,
                out("st(0)") _, out("st(1)") _, options(nostack)
            )
        };
        below == 1 && unordered == 0
    }
}

impl PartialOrd for LongDouble {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        if self.less(*other) {
            Some(std::cmp::Ordering::Less)
        } else if other.less(*self) {
            Some(std::cmp::Ordering::Greater)
        } else {
            None
        }
    }
}

/// `long double _Complex`.
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq)]
pub(crate) struct ComplexLongDouble {
    pub re: LongDouble,
    pub im: LongDouble,
}
// SAFETY: two `LongDouble`s, no padding.
unsafe impl bytemuck::Zeroable for ComplexLongDouble {}
// SAFETY: as above.
unsafe impl bytemuck::Pod for ComplexLongDouble {}
impl PartialOrd for ComplexLongDouble {
    // Not ordered (MAX/MIN are refused).
    fn partial_cmp(&self, _: &Self) -> Option<std::cmp::Ordering> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::{Arith, LongDouble};

    /// An x87 extended value from its mantissa and sign+exponent.
    fn ld(mantissa: u64, sign_exp: u16) -> LongDouble {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&mantissa.to_le_bytes());
        b[8..10].copy_from_slice(&sign_exp.to_le_bytes());
        LongDouble(b)
    }

    #[test]
    fn long_double_arithmetic_and_order_run_on_the_x87_unit() {
        let a = ld(0xC000_0000_0000_0000, 0x3FFF); // 1.5
        let b = ld(0x9000_0000_0000_0000, 0x4000); // 2.25
        assert!(a.arith(Arith::Add, b) == ld(0xF000_0000_0000_0000, 0x4000)); // 3.75
        assert!(a.arith(Arith::Mul, b) == ld(0xD800_0000_0000_0000, 0x4000)); // 3.375
        assert!(a.arith(Arith::Sub, b) == ld(0xC000_0000_0000_0000, 0xBFFE)); // -0.75
        assert!(a.less(b) && !b.less(a) && !a.less(a));
        let nan = ld(0xC000_0000_0000_0000, 0x7FFF);
        assert!(!nan.less(a) && !a.less(nan));
    }
}
