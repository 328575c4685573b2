//! The element types reductions run on, and how each predefined operation
//! combines two of them: integers, floats, `MINLOC`/`MAXLOC` pairs, C
//! complex numbers and (on x86-64) `long double`; Fortran's types share
//! the C type of the same layout.

#[cfg(target_arch = "x86_64")]
use super::long_double::{Arith, ComplexLongDouble, LongDouble};
use crate::consts::*;

/// Element types reductions run on.
pub(crate) trait Element: vpml::Pod + PartialOrd {
    fn combine(op: Op, a: Self, b: Self) -> Self;
}

/// `MAX`, `MIN`, `NO_OP` and `REPLACE`, the same for every type
/// (`MAX`/`MIN` keep the first operand when the two are unordered).
fn select<T: PartialOrd>(op: Op, a: T, b: T) -> T {
    match op {
        MPI_MAX if b > a => b,
        MPI_MIN if b < a => b,
        MPI_MAX | MPI_MIN | MPI_NO_OP => a,
        _ => b, // MPI_REPLACE
    }
}

macro_rules! int_element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            fn combine(op: Op, a: Self, b: Self) -> Self {
                match op {
                    MPI_SUM => a.wrapping_add(b),
                    MPI_PROD => a.wrapping_mul(b),
                    MPI_LAND => ((a != 0) && (b != 0)) as $t,
                    MPI_LOR => ((a != 0) || (b != 0)) as $t,
                    MPI_LXOR => ((a != 0) != (b != 0)) as $t,
                    MPI_BAND => a & b,
                    MPI_BOR => a | b,
                    MPI_BXOR => a ^ b,
                    _ => select(op, a, b),
                }
            }
        }
    )*};
}
int_element!(i8, u8, i16, u16, i32, u32, i64, u64);

macro_rules! float_element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            fn combine(op: Op, a: Self, b: Self) -> Self {
                match op {
                    MPI_SUM => a + b,
                    MPI_PROD => a * b,
                    // Logical operations on floats, as MPICH allows them
                    // (non-zero is true; the result is 1 or 0).
                    MPI_LAND => ((a != 0.0) && (b != 0.0)) as u8 as $t,
                    MPI_LOR => ((a != 0.0) || (b != 0.0)) as u8 as $t,
                    MPI_LXOR => ((a != 0.0) != (b != 0.0)) as u8 as $t,
                    _ => select(op, a, b),
                }
            }
        }
    )*};
}
float_element!(f32, f64);

/// A (value, index) pair of `MINLOC`/`MAXLOC`, laid out as MPICH's pair
/// types: the value, padding up to the index (`gap`), the index, padding
/// to the pair's size (`pad`).
macro_rules! pair_element {
    ($($name:ident($v:ty, $gap:ty, $i:ty, $pad:ty)),*) => {$(
        #[repr(C)]
        #[derive(Clone, Copy, PartialEq, PartialOrd, Default)]
        pub(crate) struct $name {
            value: $v,
            gap: $gap,
            index: $i,
            pad: $pad,
        }
        // SAFETY: plain integers and floats with explicit padding fields:
        // every bit pattern is valid and there are no implicit holes.
        unsafe impl bytemuck::Zeroable for $name {}
        // SAFETY: as above.
        unsafe impl bytemuck::Pod for $name {}
        impl Element for $name {
            fn combine(op: Op, a: Self, b: Self) -> Self {
                let take_b = match op {
                    MPI_MAXLOC => b.value > a.value || (b.value == a.value && b.index < a.index),
                    MPI_MINLOC => b.value < a.value || (b.value == a.value && b.index < a.index),
                    MPI_NO_OP => false,
                    _ => true, // MPI_REPLACE
                };
                if take_b { b } else { a }
            }
        }
    )*};
}
pair_element!(
    IntInt(i32, (), i32, ()),
    FloatInt(f32, (), i32, ()),
    DoubleInt(f64, (), i32, u32),
    LongInt(i64, (), i32, u32),
    ShortInt(i16, u16, i32, ()),
    // Fortran's MPI_2REAL and MPI_2DOUBLE_PRECISION: the index is a real.
    FloatFloat(f32, (), f32, ()),
    DoubleDouble(f64, (), f64, ())
);

#[cfg(target_arch = "x86_64")]
pair_element!(LongDoubleInt(LongDouble, (), i32, [u32; 3]));

/// A C complex number (`float _Complex`, `double _Complex`).
macro_rules! complex_element {
    ($($name:ident($t:ty)),*) => {$(
        #[repr(C)]
        #[derive(Clone, Copy, PartialEq, Default)]
        pub(crate) struct $name {
            re: $t,
            im: $t,
        }
        // SAFETY: two floats, no padding: every bit pattern is valid.
        unsafe impl bytemuck::Zeroable for $name {}
        // SAFETY: as above.
        unsafe impl bytemuck::Pod for $name {}
        impl PartialOrd for $name {
            // Complex numbers are not ordered (MAX/MIN are refused).
            fn partial_cmp(&self, _: &Self) -> Option<std::cmp::Ordering> {
                None
            }
        }
        impl Element for $name {
            fn combine(op: Op, a: Self, b: Self) -> Self {
                match op {
                    MPI_SUM => $name { re: a.re + b.re, im: a.im + b.im },
                    MPI_PROD => $name {
                        re: a.re * b.re - a.im * b.im,
                        im: a.re * b.im + a.im * b.re,
                    },
                    _ => select(op, a, b),
                }
            }
        }
    )*};
}
complex_element!(ComplexF32(f32), ComplexF64(f64));

#[cfg(target_arch = "x86_64")]
impl Element for LongDouble {
    fn combine(op: Op, a: Self, b: Self) -> Self {
        let (x, y) = (!a.is_zero(), !b.is_zero());
        match op {
            MPI_SUM => a.arith(Arith::Add, b),
            MPI_PROD => a.arith(Arith::Mul, b),
            // Logical operations, as on the other floats.
            MPI_LAND => LongDouble::from_bool(x && y),
            MPI_LOR => LongDouble::from_bool(x || y),
            MPI_LXOR => LongDouble::from_bool(x != y),
            _ => select(op, a, b),
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl Element for ComplexLongDouble {
    fn combine(op: Op, a: Self, b: Self) -> Self {
        let mul = |x: LongDouble, y: LongDouble| x.arith(Arith::Mul, y);
        match op {
            MPI_SUM => ComplexLongDouble {
                re: a.re.arith(Arith::Add, b.re),
                im: a.im.arith(Arith::Add, b.im),
            },
            MPI_PROD => ComplexLongDouble {
                re: mul(a.re, b.re).arith(Arith::Sub, mul(a.im, b.im)),
                im: mul(a.re, b.im).arith(Arith::Add, mul(a.im, b.re)),
            },
            _ => select(op, a, b),
        }
    }
}
